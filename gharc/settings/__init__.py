"""Process settings declared once and read from argv and the environment.

``gharc controller`` and ``gharc webhook-server`` each have one settings dataclass whose
fields carry their flag, environment variable, help text and chart value
(:mod:`gharc.settings.declare`); the parser, the environment fallback, the validation and
the flag tables of docs/configuration.md are derived from those fields, so a flag is named
and given its default in one place. What more than one process shares (logging, GitHub
credentials, the metrics address) lives in :mod:`gharc.settings.common` and
:mod:`gharc.settings.credentials`.

The listener is configured by a JSON file (:mod:`gharc.listener.config`) and must stay
light: nothing under :mod:`gharc.listener` imports this package.
"""
