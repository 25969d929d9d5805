"""The wsgi.py ``django-admin startproject`` writes, untouched: for
``gunicorn --logger-class boundlog.gunicorn.Logger --access-logfile access.log``."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.apps.django_site.settings")

application = get_wsgi_application()
