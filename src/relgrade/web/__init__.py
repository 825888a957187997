"""relgrade's grading web page (``relgrade serve``); see :mod:`relgrade.web.app`."""
