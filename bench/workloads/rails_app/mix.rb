# The request mix of the benchmark's Rails app (bench_app.rb), without Rails: request number i is
# RailsBench.route(i, post_ids, author_ids) -> [verb, path, params]. Mostly page views, some JSON,
# one write in twenty. Used in-process by bench_app.rb (RailsBench.request) and over HTTP by the
# puma-cluster workload's load generator.
module RailsBench
  module_function

  def route(i, post_ids, author_ids)
    id = post_ids[(i * 7919) % post_ids.size]
    case i % 20
    when 0 then [:post, "/posts/#{id}/comments", { "comment[name]" => "bench", "comment[body]" => "comment #{i}" }]
    when 1..6 then [:get, "/posts/#{id}", nil]
    when 7..10 then [:get, "/posts?page=#{1 + i % 15}", nil]
    when 11, 12 then [:get, "/", nil]
    when 13..15 then [:get, "/authors/#{author_ids[i % author_ids.size]}", nil]
    else [:get, "/api/posts/#{id}", nil]
    end
  end

  # The status request i must answer with (a write redirects to the post).
  def expected_status(i) = (i % 20).zero? ? 302 : 200
end
