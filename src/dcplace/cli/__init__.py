"""The ``dcplace`` command."""
