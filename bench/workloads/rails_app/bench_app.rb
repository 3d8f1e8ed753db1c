# The Rails application of the rails and prefork workloads (bench/workloads/rails.rb, prefork.rb):
# a railsbench-like app on sqlite3 (models Author, Post, Comment, Tag/Tagging; HTML views with a
# layout and partials, a JSON endpoint and a form POST), booted in production mode with eager
# loading, its database (a temporary file, removed at exit) created and seeded deterministically.
# Requiring this file boots it; RailsBench.request(i) then serves request number i of a fixed mix
# in-process (Rack::MockRequest) and RailsBench.expect(i, response) checks the answer. The views
# live in app/views/ next to this file; the request mix in mix.rb; config.ru and puma.rb serve the
# app with Puma (the puma-cluster workload). The caller activates the gems first
# (Bench.use_gems("railties", "actionpack", "actionview", "activerecord", "sqlite3")).
require "tmpdir"
require "logger"
ENV["RAILS_ENV"] = "production"
db_dir = Dir.mktmpdir("mosaic-bench-rails-")
at_exit { FileUtils.rm_rf(db_dir) }
# A workload whose processes share the database file sets RailsBench::SQLITE_TIMEOUT_MS before
# requiring this file: how long SQLite waits for another process's write lock (default: no wait).
db_query = defined?(RailsBench::SQLITE_TIMEOUT_MS) ? "?timeout=#{RailsBench::SQLITE_TIMEOUT_MS}" : ""
ENV["DATABASE_URL"] = "sqlite3:#{db_dir}/bench.sqlite3#{db_query}"

require "rails"
require "active_record/railtie"
require "action_controller/railtie"
require "action_view/railtie"

class BenchApp < Rails::Application
  config.load_defaults 8.0
  config.root = __dir__
  config.eager_load = true
  config.enable_reloading = false
  config.logger = Logger.new(nil)
  config.log_level = :fatal
  config.secret_key_base = "mosaic-bench-" * 8
  config.hosts.clear
  config.consider_all_requests_local = false
  config.action_dispatch.show_exceptions = :none # an error raises, so a broken run fails loudly
  config.action_controller.allow_forgery_protection = false
  config.active_record.dump_schema_after_migration = false
end
BenchApp.initialize!

ActiveRecord::Migration.verbose = false
ActiveRecord::Schema.define do
  create_table(:authors) { |t| t.string :name; t.string :email; t.text :bio; t.timestamps }
  create_table(:posts) do |t|
    t.references :author; t.string :title; t.text :body; t.integer :views, default: 0; t.timestamps
  end
  create_table(:comments) { |t| t.references :post; t.string :name; t.text :body; t.timestamps }
  create_table(:tags) { |t| t.string :name }
  create_table(:taggings) { |t| t.references :post; t.references :tag }
end

class ApplicationRecord < ActiveRecord::Base
  self.abstract_class = true
end

class Author < ApplicationRecord
  has_many :posts
  validates :name, presence: true
end

class Post < ApplicationRecord
  belongs_to :author
  has_many :comments, dependent: :destroy
  has_many :taggings
  has_many :tags, through: :taggings
  validates :title, presence: true, length: { maximum: 200 }
  scope :recent, -> { order(created_at: :desc) }
  def excerpt = body.truncate(160)
end

class Comment < ApplicationRecord
  belongs_to :post
  validates :name, :body, presence: true
end

class Tag < ApplicationRecord
  has_many :taggings
end

class Tagging < ApplicationRecord
  belongs_to :post
  belongs_to :tag
end

class ApplicationController < ActionController::Base; end

class PostsController < ApplicationController
  PER_PAGE = 20

  def index
    @page = params.fetch(:page, 1).to_i.clamp(1, 1000)
    @posts = Post.recent.includes(:author, :tags).limit(PER_PAGE).offset((@page - 1) * PER_PAGE)
    @comment_counts = Comment.where(post_id: @posts.map(&:id)).group(:post_id).count
  end

  def show
    @post = Post.includes(:author, :tags, :comments).find(params[:id])
    @related = Post.where(author_id: @post.author_id).where.not(id: @post.id).limit(5)
  end
end

class AuthorsController < ApplicationController
  def show
    @author = Author.find(params[:id])
    @posts = @author.posts.recent.limit(30)
  end
end

class CommentsController < ApplicationController
  def create
    post = Post.find(params[:post_id])
    comment = post.comments.create!(params.require(:comment).permit(:name, :body))
    redirect_to post_path(post, anchor: "comment-#{comment.id}")
  end
end

module Api
  class PostsController < ApplicationController
    def show
      post = Post.includes(:author, :comments, :tags).find(params[:id])
      render json: post.as_json(only: %i[id title body views created_at],
                                include: { author: { only: %i[id name] }, tags: { only: :name },
                                           comments: { only: %i[id name body] } })
    end
  end
end

BenchApp.routes.draw do
  root "posts#index"
  resources :posts, only: %i[index show] do
    resources :comments, only: :create
  end
  resources :authors, only: :show
  namespace(:api) { resources :posts, only: :show }
end

# Seed data: deterministic, so every run serves the same pages.
WORDS = %w[heap page slot mark sweep sweep young old card barrier remembered object string array hash
           fiber thread compact move pin root stack frame method class module].freeze
text = ->(n, seed) { Array.new(n) { |i| WORDS[(seed * 31 + i * 7) % WORDS.size] }.join(" ") }
ActiveRecord::Base.transaction do
  tags = Array.new(15) { |i| Tag.create!(name: "tag-#{i}") }
  authors = Array.new(25) { |i| Author.create!(name: "Author #{i}", email: "author#{i}@example.com", bio: text.(30, i)) }
  300.times do |i|
    post = Post.create!(author: authors[i % authors.size], title: "Post #{i}: #{text.(6, i)}",
                        body: Array.new(5) { |p| text.(50, i + p) }.join("\n\n"), views: i * 13,
                        created_at: Time.utc(2025, 1, 1) + i * 3600)
    3.times { |t| Tagging.create!(post: post, tag: tags[(i + t * 5) % tags.size]) }
    8.times { |c| post.comments.create!(name: "reader #{c}", body: text.(15, i * 8 + c)) }
  end
end

# The request mix (mix.rb), served in-process.
require_relative "mix"
module RailsBench
  APP = Rack::MockRequest.new(BenchApp)
  POST_IDS = Post.pluck(:id)
  AUTHOR_IDS = Author.pluck(:id)

  module_function

  # Request number i of the mix (the same i is always the same request).
  def request(i)
    verb, path, params = route(i, POST_IDS, AUTHOR_IDS)
    verb == :post ? APP.post(path, params: params) : APP.get(path)
  end

  # Raises unless res is what request i must answer (a broken run fails loudly).
  def expect(i, res)
    ok = res.status == expected_status(i) && (res.status == 302 || res.body.size > 200)
    raise "rails: request #{i} failed with status #{res.status}: #{res.body[0, 300]}" unless ok
  end
end
