from django.urls import include, path

from . import views

urlpatterns = [
    path("hello/", views.hello),
    path("bytes/<int:size>/", views.sized),
    path("boom/", views.boom),
    path("api/", include([path("things/<slug:slug>/", views.thing)])),
]
