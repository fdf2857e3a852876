Jump = fun Jump(B, J, N, _S) when J >= N -> B; Jump(_B0, J0, N, S0) -> B = J0, {R, S} = rand:uniform_s(S0), Jump(B, trunc((B + 1) / R), N, S) end,
JCH = fun(_K, 1) -> 0; (K, N) -> H = erlang:phash2(K), Jump(-1, 0, N, rand:seed_s(exs1024, {H, H, H})) end,
Keys = [<<"key-", (integer_to_binary(I))/binary>> || I <- lists:seq(0, 999)] ++ [<<>>, <<"a">>, <<"abcdefghijkl">>, <<"abcdefghijklm">>, <<"the quick brown fox jumps over the lazy dog 0123456789">>, <<200,201,255,0,1>>],
Lines = [io_lib:format("~s ~b~s~n", [binary:encode_hex(K), erlang:phash2(K), [io_lib:format(" ~b", [JCH(K, N)]) || N <- [2,3,5,6,10,100,1000,100000]]]) || K <- Keys],
io:put_chars(Lines), ok.
