#!/usr/bin/env bash
# This run was the second half of one device call; its script is the old-vs-fixed run's:
exec bash "$(dirname "$0")/../20261130-0508-h200x2-old-vs-fixed-dense8-tp2pcie/command.sh"
