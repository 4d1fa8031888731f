#!/usr/bin/env bash
# Installs Debian packages, one apt-get at a time: make -j2 may ask for chromium, the
# node's packages and prometheus at once, and apt-get refuses to run beside another.
#
#   hack/apt-install.sh PACKAGE...
set -o errexit -o nounset -o pipefail

sudo=""
[[ "$(id -u)" == 0 ]] || sudo=sudo
# shellcheck disable=SC2016 # expanded by the inner shell
${sudo} flock /tmp/stepwise-apt.lock sh -c \
    'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null' \
    sh "$@"
