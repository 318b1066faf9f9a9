from django.urls import path

from pricing import views

app_name = "pricing"
urlpatterns = [
    path("catalog/", views.catalog, name="catalog"),
    path("catalog/<str:catalog_id>/", views.accelerator_detail, name="accelerator-detail"),
    path("books/", views.price_book_list, name="price-book-list"),
    path("books/<int:pk>/", views.price_book_detail, name="price-book-detail"),
    path("books/<int:pk>/copy/", views.price_book_copy, name="price-book-copy"),
    path("books/<int:pk>/publish/", views.price_book_publish, name="price-book-publish"),
    path("quotes/", views.quote_list, name="quote-list"),
    path("quotes/new/", views.quote_edit, name="quote-create"),
    path("quotes/<int:pk>/edit/", views.quote_edit, name="quote-edit"),
    path("quotes/<int:pk>/expire/", views.quote_expire, name="quote-expire"),
    path("import/", views.csv_upload, name="csv-upload"),
    path("onprem/", views.onprem_calculator, name="onprem"),
    path("onprem/save/", views.onprem_profile_save, name="onprem-save"),
]
