# Render one job template the way the BOSH tools do, for the release tests.
#
# Usage: ruby erb_render.rb CONTEXT.json TEMPLATE OUTPUT
#
# CONTEXT.json has the shape bosh-cli hands its renderer: `job.name`, `index`, ...,
# `job_properties` (the manifest's values, nested) and `default_properties` (every property
# of the job spec, dotted name -> default or null). As in bosh-cli, the template sees only
# the spec's properties, each with the manifest's value or else its default, through:
#   p(name_or_names[, default])   the value; raises for an unset property without default
#   if_p(*names) { |*values| }    yields when all are set; `.else { }` / `.else_if_p(...)`
#   spec                          the context as an object (spec.name, spec.index, ...)
#   name, index                   the job name and instance index
# ERB runs with trim mode "-" (`<%- -%>`), as in bosh-cli and the director.
require 'erb'
require 'json'

# Read-only object view of a hash (spec.networks.default.ip), nil for unknown keys.
class ContextObject
  def initialize(hash)
    @hash = hash
  end

  def method_missing(name, *args)
    return super unless args.empty?

    wrap(@hash[name.to_s])
  end

  def respond_to_missing?(_name, _include_private = false)
    true
  end

  def [](key)
    wrap(@hash[key.to_s])
  end

  private

  def wrap(value)
    case value
    when Hash then ContextObject.new(value)
    when Array then value.map { |item| wrap(item) }
    else value
    end
  end
end

class RenderContext
  class UnknownProperty < StandardError; end

  # What if_p returns when it did not yield: the alternatives run.
  class Otherwise
    def initialize(context)
      @context = context
    end

    def else
      yield
    end

    def else_if_p(*names, &block)
      @context.if_p(*names, &block)
    end
  end

  # What if_p returns when it yielded: the alternatives are skipped.
  class Done
    def else; end

    def else_if_p(*_names)
      self
    end
  end

  attr_reader :name, :index, :spec

  def initialize(context)
    @name = context.dig('job', 'name')
    @index = context['index']
    @spec = ContextObject.new(context)
    manifest = context['job_properties'] || {}
    @properties = {}
    (context['default_properties'] || {}).each do |dotted, default|
      value = lookup(manifest, dotted)
      store(@properties, dotted, value.nil? ? default : value)
    end
  end

  def p(names, *default)
    Array(names).each do |dotted|
      value = lookup(@properties, dotted)
      return value unless value.nil?
    end
    return default.first unless default.empty?

    raise UnknownProperty, "Can't find property '#{Array(names).join("', or '")}'"
  end

  def if_p(*names)
    values = names.map { |dotted| lookup(@properties, dotted) }
    return Otherwise.new(self) if values.any?(&:nil?)

    yield(*values)
    Done.new
  end

  def template_binding
    binding
  end

  private

  def lookup(hash, dotted)
    dotted.split('.').reduce(hash) do |node, key|
      return nil unless node.is_a?(Hash)

      node[key]
    end
  end

  def store(hash, dotted, value)
    *parents, last = dotted.split('.')
    node = parents.reduce(hash) { |current, key| current[key] ||= {} }
    node[last] = value
  end
end

context_path, template_path, output_path = ARGV
context = RenderContext.new(JSON.parse(File.read(context_path)))
template = ERB.new(File.read(template_path), trim_mode: '-')
template.filename = template_path
File.write(output_path, template.result(context.template_binding))
