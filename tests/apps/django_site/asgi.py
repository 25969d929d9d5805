"""ASGI entry point: boundlog's ASGI middleware around Django's application.

Serve it with ``uvicorn tests.apps.django_site.asgi:application --no-access-log``.
Django's handler refuses the lifespan scope; the middleware answers it instead, so the
log is closed at the lifespan shutdown (see docs/django.md).
"""

import os

from django.core.asgi import get_asgi_application

from boundlog.asgi import AccessLogMiddleware

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.apps.django_site.settings")

application = AccessLogMiddleware(get_asgi_application(), sink="access.log")
