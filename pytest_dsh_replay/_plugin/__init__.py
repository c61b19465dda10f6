"""The plugin's policy, pytest-free: everything ``plugin.py`` decides, as plain functions.

``plugin.py`` turns each pytest object into plain values (a `CollectedTest`,
a `RunScope`) and asks here: which scenario a test uses and whether it
records (``scenarios``), which layouts are refused (``layout``), one test's run from
set-up to teardown (``runs``), what to tell the user (``messages``), the ``--dsh-record`` modes
(``modes``), scenario names (``naming``), and the run's state and summary (``suite``).
"""
