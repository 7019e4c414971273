# frozen_string_literal: true

# FAIR_TENANT_GC_STRESS=1 (a stage of bin/test): every call into the Rust extension runs with GC.stress on,
# so Ruby collects garbage at each allocation the binding layer makes. A Ruby object the extension holds
# without keeping it alive is then freed under its feet, and the spec crashes or reads garbage. Stress is
# confined to the extension's calls (arguments in, results out, the Redis round trip in between): with it on
# for whole examples, a routing spec alone ran past 10 minutes.
module GcStress
  module_function

  def enable!
    native = Sidekiq::FairTenant::Native
    native.constants.map { |name| native.const_get(name) }.grep(Module).each do |mod|
      mod.prepend(wrapper(mod.public_instance_methods(false))) if mod.is_a?(Class)
      mod.singleton_class.prepend(wrapper(mod.singleton_methods(false)))
    end
  end

  def wrapper(names)
    Module.new do
      names.each do |name|
        define_method(name) do |*args, &block|
          return super(*args, &block) if GC.stress

          # Switched on inside: an interrupt landing right after it must not leave the whole run under stress.
          begin
            GC.stress = true
            super(*args, &block)
          ensure
            GC.stress = false
          end
        end
      end
    end
  end
end
