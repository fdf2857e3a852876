// Package ui serves Warren's management web UI: a single page of hand-written
// HTML, CSS and plain JavaScript modules, embedded in the binary with
// embed.FS. There is no build step and no third-party code.
//
// The management API mounts Handler at "/" of the management listener while
// "/api/" goes to the API. The UI talks only to RabbitMQ's documented /api
// endpoints (see shared/reference/management-api.md), so it works against
// Warren and, endpoint for endpoint, against RabbitMQ itself:
//
//   - Login checks the credentials with GET /api/whoami and keeps the basic
//     auth header in sessionStorage (this tab only). A 401 that /api/whoami
//     confirms sends the user back to the login page; a 401 for a single
//     endpoint (RabbitMQ also uses 401 for a missing tag) is shown as an error.
//   - Pages, by hash route: #/overview (totals, queued-message and
//     message-rate charts, nodes with memory and disk, alarms, listeners,
//     churn); #/queues and #/queues/{vhost}/{name} (filter by name or regex,
//     sort, page; rates, consumers, bindings, publish, get, purge, delete);
//     #/exchanges and #/exchanges/{vhost}/{name} (bindings both ways, bind,
//     publish, delete); #/connections, #/channels and their detail pages
//     (force close); #/users, #/vhosts, #/permissions, #/policies (list, add,
//     delete; operator policies for administrators; the policy editor has
//     typed key / value / type rows, as RabbitMQ's, besides raw JSON);
//     #/definitions (export download, import upload); #/limits (vhost and
//     user limits: set, clear); #/feature-flags (state, enable);
//     #/parameters (runtime parameters of the federation and shovel
//     components, global parameters); #/shovels (status, add, restart,
//     delete; a static shovel only restarts) and #/federation (upstreams:
//     list, add, delete; links with their status). Route segments are
//     percent-encoded, so the vhost "/" is %2F as in the API.
//   - Charts are inline SVG drawn from the *_details samples the API returns
//     for lengths_age/msg_rates_age requests, over the range the chart range
//     selector picks (RabbitMQ's: last minute, ten minutes, hour, eight
//     hours, day; kept per tab); without samples a chart keeps its own
//     history of the polled values.
//   - The current page refreshes every 5 s, never with two requests of the
//     same page in flight, and not at all while the tab is hidden
//     (document.visibilitychange) or the user has paused updates. The
//     sessionStorage key "warren.poll-ms" changes the interval for one tab
//     (the browser test uses 300 ms).
//   - Forms are plain <form>s with a <label> for every control, buttons are
//     <button>s and links are <a href>, so everything works with the
//     keyboard; confirmations use a modal <dialog>, and results and errors go
//     to live regions.
//
// Invariants:
//   - Broker data (names, payloads, properties) reaches the DOM only as text
//     nodes; no code path assigns innerHTML. The HTML is served with a
//     Content-Security-Policy allowing only the UI's own scripts and styles.
//   - Every embedded file is served with a fixed Content-Type chosen by its
//     extension (browsers refuse module scripts with a wrong one), an ETag and
//     "Cache-Control: no-cache"; nothing outside the embedded set is served.
//   - Lists that the API pages (queues, exchanges, connections, channels,
//     vhosts) are filtered, sorted and paged by the server, so the browser
//     holds one page at a time.
//
// Caveats:
//   - RabbitMQ's API has no call that closes a single channel; a channel's
//     page offers to close its connection instead.
//   - Topic permissions and upstream sets have no pages yet; the API
//     endpoints exist for tools. The shovel form takes queues only
//     (exchanges and the other keys through the API or #/parameters), and
//     in a cluster each node's pages list the shovels and links that node
//     runs.
//   - Users, permissions and policies are listed whole and paged in the
//     browser, because the API does not page them.
//   - The regular-expression filter is evaluated by the server for paged
//     lists (its regexp dialect) and by the browser (JavaScript's) for the
//     others.
package ui
