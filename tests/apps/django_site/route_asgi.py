"""asgi.py with the tests' route format (tests/unit/capture/test_routes.py): the records carry the
URL pattern settings.py's ``boundlog.django.RouteMiddleware`` left in the scope."""

import os

from django.core.asgi import get_asgi_application

from boundlog.asgi import AccessLogMiddleware

from ..route_lines import route_log_options

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.apps.django_site.settings")

application = AccessLogMiddleware(get_asgi_application(), **route_log_options())
