"""The HTTP placement service over :mod:`dcplace.engine` (FastAPI + uvicorn): ``create_app(engine)``."""

from dcplace.service.app import create_app

__all__ = ["create_app"]
