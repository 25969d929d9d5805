"""Settings for the test Django project: no database, no apps, no middleware beyond
the common one and boundlog's, which leaves each request's URL pattern for the log
(docs/django.md), so that each request reaches its view and nothing
else."""

SECRET_KEY = "boundlog-tests-only-not-a-secret"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "tests.apps.django_site.urls"
INSTALLED_APPS: list[str] = []
MIDDLEWARE = ["boundlog.django.RouteMiddleware", "django.middleware.common.CommonMiddleware"]
DATABASES: dict[str, object] = {}
USE_TZ = True
TIME_ZONE = "UTC"
LOGGING_CONFIG = None
