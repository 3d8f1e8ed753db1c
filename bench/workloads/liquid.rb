# Workload "liquid": parse and render a realistic set of Liquid templates (a shop's product list
# with partials, a blog post with comments, an order invoice), written here, with the liquid gem
# from bench/.gems. Reports parse and render throughput in templates per second.
# Skips with a message when the gem is not installed (bench/setup.sh installs it).
# Usage: ruby bench/workloads/liquid.rb [--quick]
require_relative "../lib/bench_support"
Bench.use_gems("liquid", "base64")
require "liquid"

module ShopFilters
  def money(cents) = format("$%.2f", cents.to_i / 100.0)
  def pluralize(n, one, many) = n.to_i == 1 ? "#{n} #{one}" : "#{n} #{many}"
end

class PartialFileSystem
  def initialize(partials) = @partials = partials
  def read_template_file(name) = @partials.fetch(name) { raise Liquid::FileSystemError, "no partial #{name}" }
end

PARTIALS = {
  "product_card" => <<~LIQUID,
    <article class="product{% if product.on_sale %} sale{% endif %}">
      <h3><a href="/products/{{ product.handle }}">{{ product.title | escape }}</a></h3>
      <p class="price">{% if product.on_sale %}<s>{{ product.compare_price | money }}</s> {% endif %}{{ product.price | money }}</p>
      <p>{{ product.description | strip_html | truncatewords: 20 }}</p>
      <ul class="tags">{% for tag in product.tags %}<li>{{ tag | downcase | replace: ' ', '-' }}</li>{% endfor %}</ul>
      {% if product.inventory < 5 %}<p class="low">Only {{ product.inventory }} left</p>{% endif %}
    </article>
  LIQUID
  "header" => <<~LIQUID,
    <header><h1>{{ shop.name | upcase }}</h1><nav>{% for link in shop.menu %}<a href="{{ link.url }}"{% if link.active %} class="active"{% endif %}>{{ link.title }}</a>{% unless forloop.last %} | {% endunless %}{% endfor %}</nav></header>
  LIQUID
}.freeze

TEMPLATES = {
  "collection" => <<~LIQUID,
    {% include 'header' %}
    {% assign sale_count = 0 %}
    <h2>{{ collection.title }} ({{ collection.products.size | pluralize: 'product', 'products' }})</h2>
    {% for product in collection.products %}{% if product.on_sale %}{% assign sale_count = sale_count | plus: 1 %}{% endif %}
      {% include 'product_card' %}
      {% cycle '', '', '<hr/>' %}
    {% else %}<p>No products.</p>{% endfor %}
    <p>{{ sale_count }} on sale</p>
    {% paginate %}{% for page in (1..collection.pages) %}<a href="?page={{ page }}">{{ page }}</a>{% endfor %}{% endpaginate %}
  LIQUID
  "blog_post" => <<~LIQUID,
    {% include 'header' %}
    <article><h2>{{ post.title }}</h2>
    <p class="meta">by {{ post.author.name | default: 'anonymous' }} on {{ post.published_at | date: '%B %d, %Y' }}</p>
    {% capture excerpt %}{{ post.body | strip_html | truncate: 140 }}{% endcapture %}
    <meta name="description" content="{{ excerpt | escape }}">
    {{ post.body }}
    <section class="comments"><h3>{{ post.comments.size | pluralize: 'comment', 'comments' }}</h3>
    {% for comment in post.comments limit: 50 %}
      <div class="comment {% cycle 'odd', 'even' %}"><b>{{ comment.author | capitalize }}</b>
      {% case comment.mood %}{% when 'happy' %}:){% when 'sad' %}:({% else %}:|{% endcase %}
      <p>{{ comment.text | newline_to_br }}</p></div>
    {% endfor %}</section></article>
  LIQUID
  "invoice" => <<~LIQUID,
    Invoice {{ order.number }} for {{ order.customer.name }} <{{ order.customer.email | downcase }}>
    {% for line in order.lines %}{{ forloop.index | prepend: '#' }} {{ line.title | truncate: 30 }} x{{ line.quantity }} {{ line.price | times: line.quantity | money }}
    {% endfor %}{% assign subtotal = 0 %}{% for line in order.lines %}{% assign subtotal = line.price | times: line.quantity | plus: subtotal %}{% endfor %}
    Subtotal {{ subtotal | money }}, tax {{ subtotal | times: 0.2 | round | money }}, total {{ subtotal | times: 1.2 | round | money }}
    {% if order.note != blank %}Note: {{ order.note | strip }}{% endif %}
  LIQUID
}.freeze

# The paginate tag used above, as themes define it: renders its body unchanged.
class PaginateTag < Liquid::Block; end
Liquid::Environment.default.register_tag("paginate", PaginateTag)

WORDS = %w[sturdy bright linen cotton walnut ceramic hand-made classic compact travel everyday studio].freeze
def words(n, seed) = Array.new(n) { |i| WORDS[(seed * 7 + i * 3) % WORDS.size] }.join(" ")

ASSIGNS = {
  "shop" => { "name" => "Mosaic Goods",
              "menu" => %w[Home Catalog Blog About Contact].each_with_index.map { |t, i| { "title" => t, "url" => "/#{t.downcase}", "active" => i == 1 } } },
  "collection" => {
    "title" => "Everything", "pages" => 8,
    "products" => Array.new(40) do |i|
      { "title" => "#{words(3, i).capitalize} & co. ##{i}", "handle" => "product-#{i}", "price" => 1999 + i * 150,
        "compare_price" => 2999 + i * 150, "on_sale" => i % 3 == 0, "inventory" => i % 9,
        "description" => "<p>#{words(40, i)}</p>", "tags" => Array.new(4) { |t| "Tag #{(i + t) % 11}" } }
    end
  },
  "post" => {
    "title" => "What a garbage collector does all day", "author" => { "name" => "Ada" },
    "published_at" => "2025-07-16 10:00:00", "body" => Array.new(12) { |i| "<p>#{words(60, i)}</p>" }.join("\n"),
    "comments" => Array.new(60) { |i| { "author" => "reader #{i}", "mood" => %w[happy sad meh][i % 3], "text" => "#{words(20, i)}\n#{words(8, i + 1)}" } }
  },
  "order" => {
    "number" => "#1042", "note" => "  Leave at the door.  ", "customer" => { "name" => "Grace", "email" => "Grace@Example.COM" },
    "lines" => Array.new(25) { |i| { "title" => "Item #{words(5, i)}", "quantity" => 1 + i % 4, "price" => 450 + i * 99 } }
  },
}.freeze

file_system = PartialFileSystem.new(PARTIALS)
parse = lambda do |source|
  Liquid::Template.parse(source, error_mode: :strict).tap { |t| t.registers[:file_system] = file_system }
end
render = lambda do |template|
  out = template.render!(ASSIGNS.dup, filters: [ShopFilters], registers: { file_system: file_system })
  raise "liquid: empty output" if out.size < 500
  out
end

seconds = Bench.size(4.0, 1.0)
parsed = TEMPLATES.transform_values(&parse)
parsed.each_value(&render) # warm-up and sanity check

Bench.ips("parse", seconds: seconds, batch: 1, per_call: TEMPLATES.size, unit: "templates/s") do
  TEMPLATES.each_value(&parse)
end
Bench.ips("render", seconds: seconds, batch: 1, per_call: TEMPLATES.size, unit: "templates/s") do
  parsed.each_value(&render)
end
