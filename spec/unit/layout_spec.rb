# frozen_string_literal: true

require "spec_helper"
require "open3"
require "rbconfig"
require "ripper"

# The Ruby layout (docs/ARCHITECTURE.md, "Ruby layout"): a folder of lib/sidekiq/fair_tenant/ is a namespace, each
# file defines the constant its path names and loads alone, and no namespace names constants of one that names its
# own (as ext/fair_tenant_rs/tests/layout.rs checks the Rust modules).
RSpec.describe "the Ruby layout" do
  root = File.expand_path("../../lib/sidekiq/fair_tenant", __dir__)
  loader = Sidekiq::FairTenant::Loader
  files = Dir.glob("**/*.rb", base: root).sort - %w[loader.rb tasks.rb]
  expected = files.to_h { |file| [file, file.delete_suffix(".rb").split("/").map { |p| loader.constant_name(p) }] }
  expected["errors.rb"] = ["Error"] # the one file with several constants: the error hierarchy

  # "Sidekiq::FairTenant::A::B" => file, for every constant the gem defines under Sidekiq::FairTenant.
  def self.defined_in(root, mod = Sidekiq::FairTenant, found = {})
    mod.constants(false).sort.each do |name|
      file = Array(mod.const_source_location(name)).first
      next unless file.is_a?(String) && file.start_with?("#{root}/")

      found["#{mod.name}::#{name}"] = file.delete_prefix("#{root}/")
      value = mod.const_get(name, false)
      defined_in(root, value, found) if value.is_a?(Module) && value.name == "#{mod.name}::#{name}"
    end
    found
  end

  before(:all) do
    require "sidekiq/fair_tenant/cli"
    require "sidekiq/web"
    require "sidekiq/fair_tenant/web"
  end

  it "has each file define the constant its path names, and beside it nothing but in that constant" do
    defined = self.class.defined_in(root)
    wrong = files.reject { |file| file == "errors.rb" }.filter_map do |file|
      name = "Sidekiq::FairTenant::#{expected[file].join("::")}"
      parent = name.rpartition("::").first
      beside = defined.select { |const, at| at == file && const.rpartition("::").first == parent }.keys
      "#{file}: defines #{beside.inspect}, its path names #{name}" unless beside == [name]
    end
    expect(wrong).to eq([])
  end

  it "keeps the public names as the same objects as the classes in their namespaces" do
    ft = Sidekiq::FairTenant
    expect(ft::ClientMiddleware).to be(ft::Routing::ClientMiddleware)
    expect(ft::ServerMiddleware).to be(ft::Concurrency::ServerMiddleware)
    expect(ft::FairFetch).to be(ft::FairQueues::Fetch)
    expect(ft::FairFetch.name).to eq("Sidekiq::FairTenant::FairQueues::Fetch")
    expect(ft::Interrupted.name).to eq("Sidekiq::FairTenant::Interrupted") # stored in dead jobs' error_class
  end

  it "loads each file alone, by its constant, in a fresh process after Sidekiq and the loader (no hand-kept order)" do
    script = <<~'RUBY'
      require "sidekiq"
      root, *files = ARGV
      failed = files.filter_map do |file, const|
        file, const = file.split("=")
        pid = fork do
          require "sidekiq/fair_tenant/loader"
          entry = %w[cli web].find { |name| file == "#{name}.rb" || file.start_with?("#{name}/") }
          require "sidekiq/fair_tenant/#{entry}" if entry # loaded on request by its entry point, not with the gem
          Sidekiq::FairTenant.const_get(const, false)
          exit!($LOADED_FEATURES.include?(File.join(root, file)) ? 0 : 3)
        rescue Exception => e # rubocop:disable Lint/RescueException
          warn "#{file}: #{e.class}: #{e.message}"
          exit!(1)
        end
        Process.wait(pid)
        file unless $?.success?
      end
      puts failed.join(" ")
    RUBY
    args = files.map { |file| "#{file}=#{expected[file].join("::")}" }
    out, err, status = Open3.capture3(RbConfig.ruby, "-I#{File.expand_path("../../lib", __dir__)}", "-e", script,
                                      root, *args)
    expect([out.strip, status.success?]).to eq(["", true]), err
  end

  describe "constant circles" do
    # The namespace a file belongs to: its folder's (fair_queues/fetch/serving.rb: FairQueues::Fetch; the folder's
    # own file, fair_queues.rb, too), or for a file at the top without a folder its own constant (Config).
    unit_of = lambda do |file|
      path = expected[file]
      folder = File.join(root, file.delete_suffix(".rb"))
      File.directory?(folder) || path.size == 1 ? path.join("::") : path[0...-1].join("::")
    end
    units = files.to_h { |file| [file, unit_of.call(file)] }

    it "has no namespace naming another that names it back (lib/sidekiq/fair_tenant.rb, the wiring, left out)" do
      defined = self.class.defined_in(root)
      edges = Hash.new { |h, k| h[k] = {} }
      files.each do |file|
        LayoutScan.references(File.join(root, file)).each do |line, target|
          to = units[defined["Sidekiq::FairTenant::#{target}"]] or next
          edges[units[file]][to] ||= "#{file}:#{line} names #{target}" unless to == units[file]
        end
      end
      circles = LayoutScan.circles(edges)
      expect(circles).to be_empty, "constant circles:\n#{circles.join("\n")}"
    end
  end
end

# rubocop:disable Metrics/CyclomaticComplexity, Metrics/PerceivedComplexity -- a small reader of Ruby tokens
# Reads a file of the gem for the constants it names, resolved the way Ruby does: innermost `module`/`class` first
# (the code is laid out by rubocop, so nesting follows indentation); aliases count as what they name.
module LayoutScan
  module_function

  # [[line, "A::B"], ...]: each constant chain outside comments and strings, resolved under Sidekiq::FairTenant.
  def references(path)
    scopes = scopes(File.readlines(path))
    chains(Ripper.lex(File.read(path))).filter_map do |line, absolute, names|
      target = resolve(absolute ? [] : scopes[line - 1], names)
      target && [line, target]
    end
  end

  # For each line the nesting it is in, as the names below Sidekiq::FairTenant (["FairQueues", "Fetch"]).
  def scopes(lines)
    stack = []
    lines.map do |text|
      current = stack.map(&:last).join("::").split("::").drop(2)
      if (open = text.match(/^(\s*)(?:module|class) ([A-Z][\w:]*)/)) && !text.include?("; end")
        stack.push([open[1].size, open[2]])
      elsif (close = text.match(/^(\s*)end\b/)) && stack.last&.first == close[1].size
        stack.pop
      end
      current
    end
  end

  # [line, absolute (::A or Sidekiq::FairTenant::A), names] of each chain A::B::C that is not a definition.
  def chains(tokens)
    found = []
    tokens.each_with_index do |(pos, type, text), i|
      next unless type == :on_const && !continues?(tokens, i)

      names = [text]
      j = i
      names << tokens[j += 2][2] while tokens[j + 1]&.values_at(1, 2) == [:on_op, "::"] &&
                                       tokens[j + 2]&.at(1) == :on_const
      found << [pos[0], *absolute(tokens, i, names)] unless definition?(tokens, i)
    end
    found
  end

  def continues?(tokens, index)
    index >= 2 && tokens[index - 1][1..2] == [:on_op, "::"] && %i[on_const on_ident].include?(tokens[index - 2][1])
  end

  def definition?(tokens, index)
    before = tokens[0...index].reverse.find { |t| t[1] != :on_sp }
    before && before[1] == :on_kw && %w[module class].include?(before[2])
  end

  def absolute(tokens, index, names)
    return [true, names.drop(2)] if names.first(2) == %w[Sidekiq FairTenant]
    return [true, names] if index.positive? && tokens[index - 1][1..2] == [:on_op, "::"]

    [false, names]
  end

  # The constant `names` stands for, looked up from `scope` outward, by the name it was defined with (an alias
  # as what it names); nil when it is not the gem's.
  def resolve(scope, names)
    gem = Sidekiq::FairTenant
    owners = scope.size.downto(1).map { |n| gem.const_get(scope.first(n).join("::"), false) } << gem
    owner = owners.find { |mod| mod.const_defined?(names[0], false) } or return nil
    found = names.reduce(owner) do |mod, name|
      return nil unless mod.is_a?(Module) && mod.const_defined?(name, false)

      value = mod.const_get(name, false)
      value.is_a?(Module) && value.name&.start_with?("Sidekiq::FairTenant::") ? value : "#{mod.name}::#{name}"
    end
    (found.is_a?(Module) ? found.name : found).delete_prefix("Sidekiq::FairTenant::")
  end

  # Each circle of `edges` (namespace => {namespace it names => where}), as "A -> B -> A" with where each is named.
  def circles(edges)
    found = edges.keys.sort.filter_map do |start|
      path = cycle_from(edges, start, start, [start])
      path && path.each_cons(2).map { |a, b| "#{a} -> #{b} (#{edges[a][b]})" }.join("; ")
    end
    found.uniq { |circle| circle.scan(/(\S+) ->/).flatten.sort }
  end

  def cycle_from(edges, start, node, path, seen = {})
    edges[node].keys.sort.each do |succ|
      return path + [succ] if succ == start
      next if seen[succ]

      seen[succ] = true
      found = cycle_from(edges, start, succ, path + [succ], seen) and return found
    end
    nil
  end
end
# rubocop:enable Metrics/CyclomaticComplexity, Metrics/PerceivedComplexity
