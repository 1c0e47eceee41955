#pragma once
// GET / (the chat page) and GET /ui/{file} (its scripts and styles), from the embedded files.
//
// The page and its files are public, as llama.cpp's server page is: they hold no secret and no
// model output, and a browser cannot attach a bearer token to a plain navigation. The page asks for
// the token when /v1 answers 401 and sends it on every API call; behind mTLS the browser presents
// its certificate for the page and the API alike.
//
// Every answer carries a strict Content-Security-Policy (scripts and styles only from this origin,
// no inline script, connections only to this origin), nosniff and no framing. Cache-Control no-cache
// with an ETag: the browser revalidates each load, so a new binary never runs an old page, and an
// unchanged file costs a 304.
#include "server/route_table.h"

namespace sanctum::server::ui {

void add_routes(RouteTable<>& routes);

}  // namespace sanctum::server::ui
