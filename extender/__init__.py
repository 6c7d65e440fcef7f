"""The kube-scheduler extender: a thin HTTP layer (Flask under gunicorn) over the scheduling core."""
