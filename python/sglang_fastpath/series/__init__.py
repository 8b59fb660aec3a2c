"""The patch series and the trees it applies to: read a series (``patches``, ``sets``), build a git
tree from a pinned wheel (``tree``, ``git``), edit and write it back (``source``, ``export``), check
every series (``check``) and turn one patch into an upstream pull request (``pull_request``)."""
