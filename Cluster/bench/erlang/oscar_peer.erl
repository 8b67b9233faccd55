%% W1-W3 (docs/BENCHMARKS.md) between two distributed Erlang nodes, for
%% Cluster/bench/erlang-tls.sh: the peer Oscar's TLS between nodes is
%% measured against, over inet_tls_dist (and over inet_tcp_dist in the same
%% sitting). The workloads are the ones Oscar's `oscar bench` runs:
%%   W1  1,000,000 one-way messages {tell, I, <<16 bytes>>}, then a count
%%       request; throughput from the first send to the count.
%%   W2  2,000 warm-up then 20,000 request/replies one at a time; p50, p99.
%%   W3  200,000 request/replies with 64 outstanding; throughput.
%%   W5  512 MiB in 1 MiB binaries (4 outstanding), then in 16 MiB ones
%%       (2 outstanding), to another process of the server node; MB/s.
%%   W2S W2 while another process pair streams 16 MiB binaries between the
%%       same two nodes (2 outstanding) until W2 is done.
%% Every wait has a timeout and every loop a count; the server halts when
%% the client's node goes down or after five minutes.
-module(oscar_peer).
-export([serve/0, measure/2]).

-define(TEXT, <<"abcdefghijklmnop">>).
-define(WAIT, 60000).

serve() ->
    register(oscar_peer, self()),
    register(oscar_sink, spawn_link(fun sink/0)),
    erlang:send_after(300000, self(), give_up),
    io:format("READY~n"),
    serving(0).

serving(Told) ->
    receive
        {tell, _, _} -> serving(Told + 1);
        {ask, From, Id, Text} -> From ! {answer, Id, Text}, serving(Told);
        {count, From} -> From ! {counted, Told}, serving(0);
        {watch, From} -> monitor_node(node(From), true), From ! watching, serving(Told);
        {nodedown, _} -> halt(0);
        give_up -> halt(3)
    end.

measure(Workload, ServerNode) ->
    try
        Server = connect(ServerNode, 100),
        Server ! {watch, self()},
        receive watching -> ok after ?WAIT -> exit(no_server) end,
        [io:format("RESULT ~s ~.3f ~s~n", [Name, float(Value), Unit]) || {Name, Value, Unit} <- run(Workload, Server)],
        halt(0)
    catch Class:Reason -> io:format(standard_error, "~p: ~p~n", [Class, Reason]), halt(1)
    end.

%% The server's registered process, once its node answers (it may still be starting).
connect(_, 0) -> exit(server_unreachable);
connect(Node, Tries) ->
    case net_adm:ping(Node) of
        pong -> {oscar_peer, Node};
        pang -> receive after 100 -> connect(Node, Tries - 1) end
    end.

now_ns() -> erlang:monotonic_time(nanosecond).

%% The server node's receiver of large binaries: answers with their size.
sink() ->
    receive {blob, From, Id, Bin} -> From ! {blobbed, Id, byte_size(Bin)} end,
    sink().

%% Sends Total bytes to the sink in binaries of Size, InFlight at a time;
%% with Total = infinity, until a `stop` message arrives. Returns MB/s.
stream(Server, Size, Total, InFlight) ->
    Sink = {oscar_sink, element(2, Server)},
    Bin = binary:copy(<<16#5a>>, Size),
    Count = case Total of infinity -> infinity; _ -> Total div Size end,
    Start = now_ns(),
    [Sink ! {blob, self(), Id, Bin} || Id <- lists:seq(1, InFlight)],
    Sent = streaming(Sink, Bin, InFlight, InFlight, Count, 0),
    Sent / ((now_ns() - Start) / 1.0e9) / 1.0e6.

streaming(_, _, _, 0, _, Bytes) -> Bytes;
streaming(Sink, Bin, Sent, Waiting, Count, Bytes) ->
    Size = byte_size(Bin),
    receive
        {blobbed, _, Size} when Count =:= infinity; Sent < Count ->
            Stop = receive stop -> true after 0 -> false end,
            case Stop of
                true -> streaming(Sink, Bin, Sent, Waiting - 1, Sent, Bytes + Size);
                false -> Sink ! {blob, self(), Sent + 1, Bin},
                         streaming(Sink, Bin, Sent + 1, Waiting, Count, Bytes + Size)
            end;
        {blobbed, _, Size} -> streaming(Sink, Bin, Sent, Waiting - 1, Count, Bytes + Size);
        {blobbed, _, Other} -> exit({wrong_size, Size, Other})
    after ?WAIT -> exit(stream_timeout)
    end.

run(w1, Server) ->
    N = 1000000,
    Start = now_ns(),
    tell(Server, 1, N),
    Server ! {count, self()},
    Told = receive {counted, C} -> C after ?WAIT -> exit(w1_timeout) end,
    Told =:= N orelse exit({w1_lost, N - Told}),
    [{"w1_remote_tell_throughput", N / ((now_ns() - Start) / 1.0e9), "msg/s"}];
run(w2, Server) ->
    _ = one_at_a_time(Server, 2000, []),
    Start = now_ns(),
    Latencies = lists:sort(one_at_a_time(Server, 20000, [])),
    Seconds = (now_ns() - Start) / 1.0e9,
    [{"w2_remote_ask_p50", percentile(Latencies, 0.50) / 1000, "us"},
     {"w2_remote_ask_p99", percentile(Latencies, 0.99) / 1000, "us"},
     {"w2_remote_ask_rate", 20000 / Seconds, "rt/s"}];
run(w5, Server) ->
    _ = stream(Server, 1 bsl 20, 16 bsl 20, 4),
    Small = stream(Server, 1 bsl 20, 512 bsl 20, 4),
    Large = stream(Server, 16 bsl 20, 512 bsl 20, 2),
    [{"w5_1mib_throughput", Small, "MB/s"}, {"w5_16mib_throughput", Large, "MB/s"}];
run(w2s, Server) ->
    Self = self(),
    Streamer = spawn_link(fun() ->
        Self ! streaming,
        Self ! {streamed, stream(Server, 16 bsl 20, infinity, 2)}
    end),
    receive streaming -> ok after ?WAIT -> exit(no_stream) end,
    %% W2 starts 200 ms into the stream (some 16 MiB binaries have arrived).
    [{_, P50, _}, {_, P99, _}, {_, Rate, _}] = run(w2_200ms_later, Server),
    Streamer ! stop,
    Streamed = receive {streamed, R} -> R after ?WAIT -> exit(w2s_stream_timeout) end,
    [{"w2s_remote_ask_p50", P50, "us"}, {"w2s_remote_ask_p99", P99, "us"},
     {"w2s_remote_ask_rate", Rate, "rt/s"}, {"w2s_stream_throughput", Streamed, "MB/s"}];
run(w2_200ms_later, Server) ->
    receive after 200 -> ok end,
    run(w2, Server);
run(w3, Server) ->
    Total = 200000,
    Start = now_ns(),
    Window = min(64, Total),
    [Server ! {ask, self(), Id, ?TEXT} || Id <- lists:seq(1, Window)],
    outstanding(Server, Window, Window, Total),
    [{"w3_remote_ask_c64_throughput", Total / ((now_ns() - Start) / 1.0e9), "req/s"}].

tell(_, I, N) when I > N -> ok;
tell(Server, I, N) -> Server ! {tell, I, ?TEXT}, tell(Server, I + 1, N).

one_at_a_time(_, 0, Latencies) -> Latencies;
one_at_a_time(Server, Left, Latencies) ->
    Sent = now_ns(),
    Server ! {ask, self(), Left, ?TEXT},
    receive {answer, Left, _} -> ok after ?WAIT -> exit(w2_timeout) end,
    one_at_a_time(Server, Left - 1, [now_ns() - Sent | Latencies]).

%% Sent requests so far, answers still to come; one new request per answer.
outstanding(_, _, 0, _) -> ok;
outstanding(Server, Sent, Waiting, Total) ->
    receive
        {answer, _, _} when Sent < Total ->
            Server ! {ask, self(), Sent + 1, ?TEXT},
            outstanding(Server, Sent + 1, Waiting, Total);
        {answer, _, _} ->
            outstanding(Server, Sent, Waiting - 1, Total)
    after ?WAIT -> exit(w3_timeout)
    end.

percentile(Sorted, P) -> lists:nth(max(1, min(length(Sorted), round(P * length(Sorted)))), Sorted).
