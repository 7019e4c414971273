# frozen_string_literal: true

require_relative "doc_links"

# The error messages that README.md and docs/*.md quote, and whether lib/ or ext/ can print each one.
#
# The convention (docs/DEVELOPMENT.md states it too): a doc quotes an error message as a code span that directly
# follows, after an optional colon, an error class's name (`ArgumentError`, `Sidekiq::FairTenant::ConfigurationError`,
# in backticks or not) or one of the words raises, prints, logs, warns, error, message or "naming it". A span of
# fewer than three words is a name (`ArgumentError`, `place: :rated`), not a message. A message may wrap across
# lines; fenced code blocks are not read. A message holding backticks is quoted in a double-backtick span.
class DocMessages
  SPAN = /(`+)(.+?)(?<!`)\1(?!`)/m
  LEAD = /(?:\b[A-Z]\w*Error`?|\braises|\bprints|\blogs|\bwarns|\b[Ee]rror|\bmessage|\bnaming it):?\s*\z/
  PLACEHOLDER = /#\{[^}]*\}|(?<!\{)\{[a-z_0-9:?.]*\}(?!\})|%[sdf]/
  Quote = Struct.new(:file, :line, :text)

  # Every quote of a file: its text, and the line its span starts on.
  def self.quotes(file, text)
    prose = DocLinks.outside_code_blocks(text).join
    prose.to_enum(:scan, SPAN).filter_map do
      match = Regexp.last_match
      message = match[2].gsub(/\s*\n\s*/, " ").strip
      before = prose[[match.begin(0) - 200, 0].max...match.begin(0)].gsub(/\s*\n\s*/, " ")
      next unless message.split.size >= 3 && before.match?(LEAD)

      Quote.new(file, prose[0...match.begin(0)].count("\n") + 1, message)
    end
  end

  # The string literals of lib/ (Ruby) and ext/ (Rust, but its unit tests), as patterns of a whole message: a
  # literal's own text, with its interpolations and format placeholders (`#{...}`, `{}`, `{name}`, `%s`) standing
  # for any text. Adjacent literals joined by a line continuation count as one.
  def self.literal_patterns(root)
    ruby = Dir[File.join(root, "lib/**/*.rb")].map { |f| File.read(f).gsub(/"\s*\\\n\s*"/, "") }
    rust = Dir[File.join(root, "ext/**/*.rs")].map { |f| File.read(f).split(/^#\[cfg\(test\)\]/).first }
    rust = rust.map { |code| code.gsub(/\\\n\s*/, "") }
    (ruby + rust).flat_map { |code| code.scan(/"((?:[^"\\]|\\.)*)"/).map(&:first) }.uniq.filter_map do |literal|
      pattern(literal.gsub(/\\(["\\])/, '\1'))
    end
  end

  def self.pattern(literal)
    parts = literal.split(/(#{PLACEHOLDER}|\{\{|\}\})/)
    return if literal.gsub(PLACEHOLDER, " ").split.size < 3

    body = parts.map do |part|
      case part
      when "{{" then Regexp.escape("{")
      when "}}" then Regexp.escape("}")
      when /\A#{PLACEHOLDER}\z/ then ".+?"
      else Regexp.escape(part)
      end
    end
    /\A#{body.join}\z/
  end

  def initialize(root, files)
    @root = root
    @files = files
  end

  def quotes
    @quotes ||= @files.flat_map { |file| self.class.quotes(file, File.read(File.join(@root, file))) }
  end

  # True when a literal of the sources is the message, its placeholders filled in, or holds it whole.
  def in_sources?(message)
    @patterns ||= self.class.literal_patterns(@root)
    @patterns.any? { |pattern| pattern.match?(message) || pattern.source.include?(Regexp.escape(message)) }
  end
end
