"""TrainPlan estimator: time and cost of training large language models."""
