#!/bin/sh
# record.sh captures RabbitMQ 3.10 management API responses for mgmt's golden
# tests. It needs a local RabbitMQ with rabbitmq_management enabled
# (guest:guest on 127.0.0.1:15672 and AMQP on 5672):
#
#   rabbitmq-plugins enable rabbitmq_management
#   rabbitmq-server -detached && rabbitmqctl await_startup
#   sh mgmt/testdata/record.sh      # from the repository root
#   rabbitmqctl stop
#
# If another process holds Erlang's distribution port 25672, start the node
# with RABBITMQ_DIST_PORT=25699 rabbitmq-server -detached.
#
# It creates a small topology, holds a client connection open (recordclient),
# and writes each response body to testdata/rabbitmq/<name>.json and its status
# (and Location header) to testdata/rabbitmq/status.tsv.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out="$here/rabbitmq"
api=http://127.0.0.1:15672/api
auth=guest:guest
mkdir -p "$out"
: >"$out/status.tsv"

# call NAME METHOD PATH [BODY] records one request.
call() {
	name=$1 method=$2 path=$3 body=${4-}
	hdr=$(mktemp)
	if [ -n "$body" ]; then
		code=$(curl -s -u "$auth" -X "$method" -H 'content-type: application/json' \
			-d "$body" -D "$hdr" -o "$out/$name.json" -w '%{http_code}' "$api$path")
	else
		code=$(curl -s -u "$auth" -X "$method" -D "$hdr" -o "$out/$name.json" -w '%{http_code}' "$api$path")
	fi
	loc=$(grep -i '^location:' "$hdr" | tr -d '\r' | cut -d' ' -f2- || true)
	rm -f "$hdr"
	[ -s "$out/$name.json" ] || rm -f "$out/$name.json"
	printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$method" "$path" "$code" "$loc" >>"$out/status.tsv"
}

# setup runs a request whose response is not kept.
setup() {
	curl -s -f -u "$auth" -X "$1" -H 'content-type: application/json' -d "${3-}" "$api$2" >/dev/null
}

setup PUT /vhosts/rabbit%2Fhole '{"description":"recorded","tags":"a,b"}'
setup PUT /permissions/rabbit%2Fhole/guest '{"configure":".*","write":".*","read":".*"}'
setup PUT /users/alice '{"password":"s3cret","tags":"monitoring"}'
setup PUT /users/nopass '{"password_hash":"","tags":""}'
setup PUT /permissions/%2F/alice '{"configure":"^alice","write":".*","read":".*"}'
setup PUT /topic-permissions/%2F/alice '{"exchange":"amq.topic","write":"^a","read":".*"}'
setup PUT /queues/%2F/q1 '{"durable":true,"arguments":{"x-max-length":1000}}'
setup PUT /queues/%2F/q2 '{"durable":false,"auto_delete":false}'
setup PUT /exchanges/%2F/ex1 '{"type":"topic","durable":true}'
setup PUT /exchanges/%2F/ex2 '{"type":"fanout","durable":true,"arguments":{"alternate-exchange":"amq.fanout"}}'
setup POST /bindings/%2F/e/ex1/q/q1 '{"routing_key":"q1.#"}'
setup POST /bindings/%2F/e/ex1/e/ex2 '{"routing_key":"x","arguments":{"a":1}}'
setup PUT /policies/%2F/ttl '{"pattern":"^q","definition":{"message-ttl":600000,"max-length":5000},"priority":1,"apply-to":"queues"}'
setup PUT /operator-policies/%2F/cap '{"pattern":".*","definition":{"max-length":2000},"priority":0,"apply-to":"queues"}'
setup PUT /queues/rabbit%2Fhole/q3 '{"durable":true}'

ready=$(mktemp -u)
go build -o /tmp/warren-recordclient "$here/recordclient"
/tmp/warren-recordclient -ready "$ready" &
client=$!
trap 'kill $client 2>/dev/null || true' EXIT
i=0
while [ ! -f "$ready" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
# Statistics are emitted every 5 s by default; wait for two rounds.
sleep 11

call overview GET /overview
call whoami GET /whoami
call cluster-name GET /cluster-name
call nodes GET /nodes
node=$(curl -s -u "$auth" "$api/overview" | sed 's/.*"node":"\([^"]*\)".*/\1/')
call node GET "/nodes/$node"
call vhosts GET /vhosts
call vhost GET /vhosts/%2F
call vhost-permissions GET /vhosts/%2F/permissions
call vhost-connections GET /vhosts/%2F/connections
call vhosts-paged GET '/vhosts?page=1&page_size=1'
call users GET /users
call user GET /users/alice
call user-nopass GET /users/nopass
call user-permissions GET /users/alice/permissions
call permissions GET /permissions
call permission GET /permissions/%2F/alice
call topic-permissions GET /topic-permissions
call topic-permission GET /topic-permissions/%2F/alice
call queues GET /queues
call queues-vhost GET /queues/%2F
call queues-paged GET '/queues?page=1&page_size=2&name=q&use_regex=false'
call queues-columns GET '/queues?columns=name,vhost,messages'
call queues-sorted GET '/queues?sort=messages&sort_reverse=true'
call queues-empty-sort GET '/queues?sort='
call queues-samples GET '/queues/%2F?lengths_age=60&lengths_incr=5'
call queue GET /queues/%2F/q1
call queue-bindings GET /queues/%2F/q1/bindings
call exchanges GET /exchanges
call exchanges-vhost GET /exchanges/%2F
call exchanges-paged GET '/exchanges?page=1&page_size=3'
call exchange GET /exchanges/%2F/ex1
call exchange-default GET /exchanges/%2F/amq.default
call exchange-bindings-source GET /exchanges/%2F/ex1/bindings/source
call exchange-bindings-destination GET /exchanges/%2F/ex2/bindings/destination
call bindings GET /bindings
call bindings-vhost GET /bindings/%2F
call bindings-eq GET /bindings/%2F/e/ex1/q/q1
call bindings-ee GET /bindings/%2F/e/ex1/e/ex2
call binding-eq GET /bindings/%2F/e/ex1/q/q1/q1.%23
call connections GET /connections
conn=$(curl -s -u "$auth" "$api/connections" | sed 's/.*"name":"\([^"]*->[^"]*\)".*/\1/' | sed 's/ /%20/g; s/>/%3E/g')
call connection GET "/connections/$conn"
call connection-channels GET "/connections/$conn/channels"
call channels GET /channels
chan=$(curl -s -u "$auth" "$api/channels" | sed 's/.*"name":"\([^"]*([0-9]*)\)".*/\1/' | sed 's/ /%20/g; s/>/%3E/g; s/(/%28/g; s/)/%29/g')
call channel GET "/channels/$chan"
call channels-paged GET '/channels?page=1'
call consumers GET /consumers
call consumers-vhost GET /consumers/%2F
call definitions GET /definitions
call definitions-vhost GET /definitions/%2F
call policies GET /policies
call policies-vhost GET /policies/%2F
call policy GET /policies/%2F/ttl
call operator-policies GET /operator-policies
call operator-policy GET /operator-policies/%2F/cap
call health-alarms GET /health/checks/alarms
call health-local-alarms GET /health/checks/local-alarms
call health-port-listener GET /health/checks/port-listener/5672
call health-port-listener-bad GET /health/checks/port-listener/5999
call health-protocol-listener GET /health/checks/protocol-listener/amqp091
call health-virtual-hosts GET /health/checks/virtual-hosts
call health-certificate-expiration GET /health/checks/certificate-expiration/1/months
call health-quorum-critical GET /health/checks/node-is-quorum-critical
call health-is-in-service GET /health/checks/is-in-service
call health-ready GET /health/checks/ready-to-serve-clients
call health-below-limit GET /health/checks/below-node-connection-limit
call health-target-size GET /health/checks/reached-target-cluster-size
call aliveness GET /aliveness-test/%2F

# Writes and their statuses.
call queue-put-create PUT /queues/%2F/rec1 '{"durable":true,"arguments":{"x-message-ttl":5000}}'
call queue-put-update PUT /queues/%2F/rec1 '{"durable":true,"arguments":{"x-message-ttl":5000}}'
call queue-put-inequivalent PUT /queues/%2F/rec1 '{"durable":false}'
call queue-put-badarg PUT /queues/%2F/rec2 '{"arguments":{"x-message-ttl":"soon"}}'
call queue-put-badjson PUT /queues/%2F/rec2 '{"durable":'
call queue-put-novhost PUT /queues/nosuchvhost/rec2 '{}'
call exchange-put-create PUT /exchanges/%2F/recx '{"type":"direct"}'
call exchange-put-update PUT /exchanges/%2F/recx '{"type":"direct"}'
call exchange-put-notype PUT /exchanges/%2F/recy '{}'
call exchange-put-badtype PUT /exchanges/%2F/recy '{"type":"nope"}'
call exchange-publish POST /exchanges/%2F/amq.default/publish '{"properties":{"delivery_mode":2,"headers":{"h":1}},"routing_key":"rec1","payload":"hello","payload_encoding":"string"}'
call exchange-publish-unrouted POST /exchanges/%2F/recx/publish '{"properties":{},"routing_key":"none","payload":"aGk=","payload_encoding":"base64"}'
call queue-get POST /queues/%2F/rec1/get '{"count":5,"ackmode":"ack_requeue_true","encoding":"auto","truncate":50000}'
call queue-get-empty POST /queues/%2F/q2/get '{"count":1,"ackmode":"ack_requeue_false","encoding":"auto"}'
call binding-post POST /bindings/%2F/e/recx/q/rec1 '{"routing_key":"k1","arguments":{}}'
call binding-post-args POST /bindings/%2F/e/recx/q/rec1 '{"routing_key":"k 2","arguments":{"x":"y"}}'
call binding-delete DELETE /bindings/%2F/e/recx/q/rec1/k1
call queue-purge DELETE /queues/%2F/rec1/contents
call queue-delete-ifempty DELETE '/queues/%2F/q1?if-empty=true'
call queue-delete DELETE /queues/%2F/rec1
call queue-delete-missing DELETE /queues/%2F/rec1
call queue-missing GET /queues/%2F/nosuch
call exchange-delete DELETE /exchanges/%2F/recx
call exchange-delete-default DELETE /exchanges/%2F/amq.direct
call vhost-put-create PUT /vhosts/recvh '{"description":"d"}'
call vhost-put-update PUT /vhosts/recvh ''
call vhost-delete DELETE /vhosts/recvh
call user-put-create PUT /users/bob '{"password":"x","tags":["management"]}'
call user-put-update PUT /users/bob '{"password_hash":"kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR","tags":"management,policymaker"}'
call user-put-badhash PUT /users/bob2 '{"password_hash":"!!!","tags":""}'
call user-put-notags PUT /users/bob3 '{"password":"x"}'
call permission-put-create PUT /permissions/%2F/bob '{"configure":".*","write":".*","read":".*"}'
call permission-put-update PUT /permissions/%2F/bob '{"configure":"","write":".*","read":".*"}'
call permission-put-nouser PUT /permissions/%2F/nobody '{"configure":".*","write":".*","read":".*"}'
call permission-delete DELETE /permissions/%2F/bob
call user-delete DELETE /users/bob
call policy-put-create PUT /policies/%2F/recpol '{"pattern":"^rec","definition":{"expires":100000},"apply-to":"queues"}'
call policy-put-bad PUT /policies/%2F/recpol2 '{"pattern":"^rec","definition":{"expires":"x"}}'
call policy-delete DELETE /policies/%2F/recpol
call cluster-name-put PUT /cluster-name '{"name":"rabbit@vm"}'
call definitions-post POST /definitions '{"queues":[{"name":"defq","vhost":"/","durable":true,"auto_delete":false,"arguments":{}}]}'
call definitions-post-bad POST /definitions '{"queues":'
call connection-delete DELETE "/connections/$conn"
curl -s -o "$out/unauthorised-noauth.json" -w 'unauthorised-noauth\tGET\t/overview\t%{http_code}\t\n' "$api/overview" >>"$out/status.tsv"
curl -s -u guest:wrong -o "$out/unauthorised-wrong.json" -w 'unauthorised-wrong\tGET\t/overview\t%{http_code}\t\n' "$api/overview" >>"$out/status.tsv"
curl -s -u nopass: -o "$out/unauthorised-notmgmt.json" -w 'unauthorised-notmgmt\tGET\t/overview\t%{http_code}\t\n' "$api/overview" >>"$out/status.tsv"
curl -s -u alice:s3cret -o "$out/alice-users.json" -w 'alice-users\tGET\t/users\t%{http_code}\t\n' "$api/users" >>"$out/status.tsv"
curl -s -u alice:s3cret -o "$out/alice-queues.json" -w 'alice-queues\tGET\t/queues\t%{http_code}\t\n' "$api/queues" >>"$out/status.tsv"
curl -s -u alice:s3cret -o "$out/alice-vhost-queues.json" -w 'alice-vhost-queues\tGET\t/queues/rabbit%%2Fhole\t%{http_code}\t\n' "$api/queues/rabbit%2Fhole" >>"$out/status.tsv"
curl -s -D "$out/noauth-headers.txt" -o /dev/null "$api/overview"

# Clean up the recording topology so the node is left as it was found.
kill $client 2>/dev/null || true
for q in q1 q2 defq; do curl -s -u "$auth" -X DELETE "$api/queues/%2F/$q" >/dev/null; done
for x in ex1 ex2; do curl -s -u "$auth" -X DELETE "$api/exchanges/%2F/$x" >/dev/null; done
curl -s -u "$auth" -X DELETE "$api/policies/%2F/ttl" >/dev/null
curl -s -u "$auth" -X DELETE "$api/operator-policies/%2F/cap" >/dev/null
curl -s -u "$auth" -X DELETE "$api/vhosts/rabbit%2Fhole" >/dev/null
for u in alice nopass bob3; do curl -s -u "$auth" -X DELETE "$api/users/$u" >/dev/null; done
echo "recorded $(wc -l <"$out/status.tsv") responses in $out"
