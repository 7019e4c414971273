# frozen_string_literal: true

require "json"

module Sidekiq
  module FairTenant
    # Job data (tenants, keys, queue names, jids, class names) as text safe for a terminal or a log line, as
    # `git` and `ls` show odd file names: C0 controls, DEL, C1 controls and the bidi overrides are shown as
    # visible escapes (\e, \n, \t, \r, \xNN, \u{NNNN}), a backslash is doubled (so the text is unambiguous), and
    # bytes that are not UTF-8 are shown as \xNN. The result is always valid UTF-8. `--json` output carries the
    # exact names: JSON escapes C0 controls itself, and `json` escapes DEL, C1 and bidi characters as \uNNNN.
    module Printable
      UNSAFE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069\\]/
      UNSAFE_IN_JSON = /[\u007f-\u009f\u202a-\u202e\u2066-\u2069]/
      NAMED = { "\e" => "\\e", "\n" => "\\n", "\t" => "\\t", "\r" => "\\r", "\\" => "\\\\" }.freeze
      AS_BYTES = [Encoding::UTF_8, Encoding::BINARY, Encoding::US_ASCII].freeze
      PREFIX = "[sidekiq-fair_tenant] "

      module_function

      def call(value)
        text = utf8(value.to_s)
        return text.gsub(UNSAFE) { |char| escape(char) } if text.valid_encoding?

        text.each_char.map { |char| char.valid_encoding? ? call(char) : hex(char) }.join
      end

      # Every String in a result (Hash values and keys, Array items) made printable; other values as they are.
      def deep(value)
        case value
        when Hash then value.to_h { |k, v| [deep(k), deep(v)] }
        when Array then value.map { |v| deep(v) }
        when String then call(value)
        else value
        end
      end

      # Pretty JSON of a result, exact (it parses back to the same strings), with no character a terminal acts
      # on: those JSON leaves as they are can only stand inside strings, where \uNNNN means the same.
      def json(value)
        JSON.pretty_generate(value).gsub(UNSAFE_IN_JSON) { |char| format("\\u%04x", char.ord) }
      end

      # A log line of the gem: its prefix and the message made printable.
      def log(message)
        "#{PREFIX}#{call(message)}"
      end

      def escape(char)
        NAMED.fetch(char) { char.ord < 0x80 ? hex(char) : format("\\u{%04X}", char.ord) }
      end

      def hex(bytes)
        bytes.bytes.map { |b| format("\\x%02X", b) }.join
      end

      def utf8(text)
        return text.dup.force_encoding(Encoding::UTF_8) if AS_BYTES.include?(text.encoding)

        text.encode(Encoding::UTF_8)
      rescue EncodingError
        text.b.force_encoding(Encoding::UTF_8)
      end
    end
  end
end
