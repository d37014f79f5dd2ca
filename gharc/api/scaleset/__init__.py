"""Scale set mode API (``actions.github.com/v1alpha1``): constants, naming, CRD schemas."""
