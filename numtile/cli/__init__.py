"""The ``numtile`` command."""
