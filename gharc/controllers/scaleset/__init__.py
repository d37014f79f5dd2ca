"""gharc.controllers.scaleset."""
