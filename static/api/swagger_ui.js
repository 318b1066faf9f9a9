// Starts Swagger UI on /api/docs/. drf-spectacular renders this script inline
// (drf_spectacular/swagger_ui.js, BSD-3-Clause), which the Content-Security-Policy refuses;
// this is the same start-up, its settings read from #swagger-ui's data- attributes instead
// of template variables.
(function () {
  "use strict";
  const root = document.getElementById("swagger-ui");
  const config = root.dataset;
  const swaggerSettings = JSON.parse(config.settings || "{}");
  const oauth2Config = JSON.parse(config.oauth2Config || "{}");
  const schemaAuthNames = JSON.parse(config.schemaAuthNames || "[]");
  let schemaAuthFailed = false;
  let ui;

  // A schema served only to callers who authenticate is fetched again when they log in or out.
  const reloadSchema = (original) => (...args) => {
    schemaAuthFailed = false;
    setTimeout(() => ui.specActions.download());
    return original(...args);
  };
  const reloadSchemaOnAuthChange = () => ({
    statePlugins: {
      auth: {
        wrapActions: {
          authorizeOauth2: reloadSchema,
          authorize: reloadSchema,
          logout: reloadSchema,
        },
      },
    },
  });
  const plugins = schemaAuthNames.length > 0 ? [reloadSchemaOnAuthChange] : [];

  const isSchemaUrl = (url) =>
    ui !== undefined && url === new URL(ui.getConfigs().url, document.baseURI).href;

  const responseInterceptor = (response) => {
    if (!response.ok && isSchemaUrl(response.url)) {
      console.warn(
        "schema request received '" + response.status +
          "'. disabling credentials for schema till logout."
      );
      if (!schemaAuthFailed) {
        // Only retry once, to prevent an endless loop.
        schemaAuthFailed = true;
        setTimeout(() => ui.specActions.download());
      }
    }
    return response;
  };

  function storedAuthorization() {
    if (ui !== undefined) {
      const state = ui.getState().get("auth").get("authorized");
      if (state !== undefined && Object.keys(state.toJS()).length !== 0) return state.toJS();
    } else if (![undefined, "{}"].includes(localStorage.authorized)) {
      return JSON.parse(localStorage.authorized);
    }
    return undefined;
  }

  function injectAuthCredentials(request) {
    const authorized = storedAuthorization();
    if (authorized === undefined) return;
    for (const authName of schemaAuthNames) {
      const authDef = authorized[authName];
      if (authDef === undefined || authDef.schema === undefined) continue;
      const schema = authDef.schema;
      if (schema.type === "http" && schema.scheme === "bearer") {
        request.headers.Authorization = "Bearer " + authDef.value;
      } else if (schema.type === "http" && schema.scheme === "basic") {
        request.headers.Authorization =
          "Basic " + btoa(authDef.value.username + ":" + authDef.value.password);
      } else if (schema.type === "apiKey" && schema.in === "header") {
        request.headers[schema.name] = authDef.value;
      } else if (schema.type === "oauth2" && authDef.token.token_type === "Bearer") {
        request.headers.Authorization = "Bearer " + authDef.token.access_token;
      } else {
        continue;
      }
      return;
    }
  }

  const requestInterceptor = (request) => {
    if (request.loadSpec && schemaAuthNames.length > 0 && !schemaAuthFailed) {
      try {
        injectAuthCredentials(request);
      } catch (error) {
        console.error("schema auth injection failed with error: ", error);
      }
    }
    // Session-authenticated calls that change data carry the CSRF token; other origins do not.
    if (!["GET", undefined].includes(request.method) && request.credentials === "same-origin") {
      request.headers[config.csrfHeaderName] = config.csrfToken;
    }
    return request;
  };

  ui = window.SwaggerUIBundle({
    url: config.schemaUrl,
    dom_id: "#swagger-ui",
    presets: [window.SwaggerUIBundle.presets.apis],
    plugins,
    layout: "BaseLayout",
    requestInterceptor,
    responseInterceptor,
    ...swaggerSettings,
  });
  if (Object.keys(oauth2Config).length > 0) ui.initOAuth(oauth2Config);
})();
