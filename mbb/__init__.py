"""mbb — the SCARCE arena: coding agents negotiating for one shared execution resource."""

__version__ = "0.1.0"
