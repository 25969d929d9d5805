"""A minimal Django project, as ``django-admin startproject`` lays one out, served by
tests/integrations/test_integration_django.py.  Its wsgi.py and asgi.py are the quick starts of
docs/django.md with only the project's module path changed
(``mysite`` there is ``tests.apps.django_site`` here)."""
