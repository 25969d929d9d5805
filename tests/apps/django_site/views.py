from django.http import HttpRequest, HttpResponse


def hello(request: HttpRequest) -> HttpResponse:
    return HttpResponse(b"hello from django\n", content_type="text/plain")


def sized(request: HttpRequest, size: int) -> HttpResponse:
    return HttpResponse(b"x" * size, content_type="application/octet-stream")


def boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a view that raises: Django answers 500")


def thing(request: HttpRequest, slug: str) -> HttpResponse:
    return HttpResponse(f"thing {slug}\n".encode(), content_type="text/plain")
