"""WSGI entry point: boundlog's WSGI middleware around Django's application.

Serve it with ``gunicorn tests.apps.django_site.wsgi:application`` (without
``--access-logfile``, or gunicorn writes its own access log as well).  Under gunicorn
the logger class needs no change here at all: see ``plain_wsgi``.
"""

import os

from django.core.wsgi import get_wsgi_application

from boundlog.wsgi import AccessLogMiddleware

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.apps.django_site.settings")

application = AccessLogMiddleware(get_wsgi_application(), sink="access.log")
