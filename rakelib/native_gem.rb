# frozen_string_literal: true

require "rake/extensiontask"

# Rake::ExtensionTask that lets the platform gem's spec be adjusted before it is packaged, as rake-compiler does
# only for cross builds (`cross_compiling`); rb_sys's own ExtensionTask hooks the same private method.
class NativeGemExtensionTask < Rake::ExtensionTask
  # Called with the platform gem's Gem::Specification (files already include the compiled extension).
  def native_gem(&block)
    @native_gem = block
  end

  private

  def define_native_tasks(for_platform = nil, ruby_ver = RUBY_VERSION, callback = nil)
    native_gem = @native_gem
    super(for_platform, ruby_ver, lambda do |spec|
      callback&.call(spec)
      native_gem&.call(spec)
    end)
  end
end
