"""ttg envs over OpenEnv: ``ttg serve`` (one env stack per session, forks for branching) and ``RemoteEnv``.

The server is OpenEnv's own (``openenv.core.env_server.http_server.create_app``); ``RemoteEnv`` is a
gymnasium env over OpenEnv's ``GenericEnvClient``. Both need the ``serve`` extra and import it lazily.
"""

from .._optional import lazy_attributes

__getattr__ = lazy_attributes(
    __name__,
    {
        "RemoteEnv": ".remote_env",
        "RemoteEnvError": ".remote_env",
        "ServeConfig": ".server",
        "make_app": ".server",
        "serve": ".server",
    },
)

__all__ = ["RemoteEnv", "RemoteEnvError", "ServeConfig", "make_app", "serve"]
