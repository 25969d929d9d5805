from django.urls import path

from . import views

urlpatterns = [
    path("hello/", views.hello),
    path("bytes/<int:size>/", views.sized),
    path("boom/", views.boom),
]
