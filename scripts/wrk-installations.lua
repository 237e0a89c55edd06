-- wrk script: PUT a new installation per request (Listen right), for `make bench-ingress`.
-- Arguments after `--`: the Authorization header value and the hub name.
local threads = {}

function setup(thread)
  thread:set("thread_id", #threads)
  table.insert(threads, thread)
end

function init(args)
  token = args[1]
  hub = args[2]
  counter = 0
end

function request()
  counter = counter + 1
  local id = "bench-" .. thread_id .. "-" .. counter
  local body = '{"installationId":"' .. id .. '","platform":"apns","pushChannel":"' .. string.format("%064d", counter) ..
    '","tags":["Sports","lang:en","username:user' .. counter .. '"],"userId":"user' .. counter .. '"}'
  return wrk.format("PUT", "/" .. hub .. "/installations/" .. id .. "?api-version=2015-01",
    { ["Authorization"] = token, ["Content-Type"] = "application/json" }, body)
end
