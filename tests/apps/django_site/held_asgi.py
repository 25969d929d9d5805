"""asgi.py with one option more: the writer holds every line until the log is closed
(``flush_interval=3600``), so that every line found after the server exits was written
by the shutdown drain.  tests/integrations/test_integration_django.py checks that drain with it."""

import os

from django.core.asgi import get_asgi_application

from boundlog.asgi import AccessLogMiddleware

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.apps.django_site.settings")

application = AccessLogMiddleware(get_asgi_application(), sink="access.log", flush_interval=3600)
