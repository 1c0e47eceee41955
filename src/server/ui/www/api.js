// The page's calls to its own server: the bearer token (kept only in this tab's sessionStorage),
// errors that say what to do, and the SSE stream of /v1/chat/completions read chunk by chunk.

const TOKEN_KEY = "sanctum.token";

export function get_token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function set_token(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// kind: "auth" (401: ask for a token), "unreachable" (no answer at all), "draining" (503 while the
// server shuts down), "http" (any other error status).
export class ApiError extends Error {
  constructor(kind, message, status = 0) {
    super(message);
    this.kind = kind;
    this.status = status;
  }
}

function headers(json) {
  const h = {};
  if (json) h["Content-Type"] = "application/json";
  const token = get_token();
  if (token) h["Authorization"] = `Bearer ${token}`;
  return h;
}

async function error_from(response) {
  let message = `${response.status} ${response.statusText}`;
  let draining = false;
  try {
    const body = await response.json();
    if (body?.error?.message) message = body.error.message;
    if (body?.error?.code === "draining" || body?.status === "draining") draining = true;
  } catch {
    // Not JSON: the status line says enough.
  }
  if (response.status === 401) {
    const why = get_token() ? "The token was refused" : "This server requires a bearer token";
    return new ApiError("auth", `${why}: ${message}`, 401);
  }
  if (response.status === 503 && draining)
    return new ApiError("draining", `The server is shutting down and takes no new requests (${message}). Start it again, then retry.`, 503);
  return new ApiError("http", `The server answered ${response.status}: ${message}`, response.status);
}

async function call(path, init) {
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError("unreachable", `Cannot reach the server at ${location.origin}: is sanctum serve still running?`);
  }
  if (!response.ok) throw await error_from(response);
  return response;
}

export async function health() {
  try {
    const response = await fetch("/health", { cache: "no-store" });
    if (response.ok) return "ok";
    return response.status === 503 ? "draining" : "error";
  } catch {
    return "down";
  }
}

export async function list_models() {
  const response = await call("/v1/models", { headers: headers(false) });
  return (await response.json()).data || [];
}

// Streams one chat completion. on_chunk gets every parsed chunk; returns when the stream ends.
// The signal aborts it (the server sees the connection close and stops generating).
export async function stream_chat(body, signal, on_chunk) {
  const response = await call("/v1/chat/completions", {
    method: "POST",
    headers: headers(true),
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
    signal,
  });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    // Events end with a blank line; a partial one waits for the next read.
    let end;
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
      const data = event
        .split(/\r?\n/)
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).trimStart())
        .join("\n");
      if (!data) continue;
      if (data === "[DONE]") return;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new ApiError("http", `The server stopped the answer: ${chunk.error.message || JSON.stringify(chunk.error)}`);
      on_chunk(chunk);
    }
  }
}
