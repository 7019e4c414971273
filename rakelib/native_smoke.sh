#!/usr/bin/env bash
# Run inside a brand-new Debian root without Rust (../shared/fresh-machine-check with FRESH_NO_RUST=1: Debian 12 by
# `rake package:native_smoke` and .ci/platform-gem, forky by .ci/platform-gem), from the clone of the project:
# installs what an application's machine has (Debian's Ruby and Sidekiq, redis-server; no Rust, no C compiler, no
# make, no libclang, no Ruby headers), then the platform gem given as $1 with RubyGems, and runs
# rakelib/package_smoke.rb against it (require the gem, re-route a job, fair-fetch one with a `sidekiq` process).
set -euo pipefail
gem_file=$1

echo "==> apt-get install ruby ruby-sidekiq redis-server"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ruby ruby-sidekiq redis-server >/dev/null

for tool in cargo rustc cc gcc clang make; do
  if command -v "$tool" >/dev/null; then
    echo "native_smoke: $tool is installed: this root must have no toolchain" >&2
    exit 1
  fi
done
for pkg in ruby-dev libclang-dev; do
  if dpkg -s "$pkg" >/dev/null 2>&1; then
    echo "native_smoke: $pkg is installed: this root must have no build dependencies" >&2
    exit 1
  fi
done
if ldconfig -p | grep -q libclang; then
  echo "native_smoke: a libclang is installed" >&2
  exit 1
fi
echo "no cargo, rustc, cc, gcc, clang, make, ruby-dev or libclang; $(ruby -v)"

echo "==> gem install --local $gem_file"
out=$(gem install --local --no-document "$gem_file" 2>&1) || { echo "$out"; exit 1; }
echo "$out"
if grep -q "Building native extensions" <<<"$out"; then
  echo "native_smoke: the platform gem compiled at install" >&2
  exit 1
fi

echo "==> ruby rakelib/package_smoke.rb"
# The gem's own platform (x86_64-linux), which forky's RubyGems calls x86_64-linux-gnu on this machine.
platform=$(ruby -rrubygems/package -e 'print Gem::Package.new(ARGV[0]).spec.platform' "$gem_file")
SMOKE_GEM_HOME=$(ruby -e 'print Gem.dir') SMOKE_PLATFORM=$platform ruby rakelib/package_smoke.rb
