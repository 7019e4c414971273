# frozen_string_literal: true

namespace :lint do
  desc "Check Rust formatting and run clippy with warnings as errors"
  task :rust do
    sh "cargo fmt --all --check"
    sh "cargo clippy --locked --all-targets -- -D warnings"
  end

  desc "Run RuboCop"
  task :ruby do
    sh "rubocop"
  end
end

desc "Run all linters"
task lint: %w[lint:rust lint:ruby]
