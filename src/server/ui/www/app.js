// The chat page: wires the store, the API and the views together.
import { ApiError, health, list_models, set_token, stream_chat } from "./api.js";
import { create_message, update_message } from "./messages.js";
import { Reply } from "./reply.js";
import { render_sidebar, start_rename } from "./sidebar.js";
import { Store, export_json } from "./store.js";

const $ = (id) => document.getElementById(id);
const store = new Store();
const articles = new WeakMap(); // message -> its element while on screen
let models = [];
let running = null; // { controller, message } while an answer streams
let pending_images = []; // data: URLs attached to the next message
let retry_after_token = false;
let last_health = "";

// ---- theme, banner, status -------------------------------------------------------------------

function apply_theme() {
  const preferred = matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  document.documentElement.dataset.theme = store.theme || preferred;
}

// source: "health" for what the /health poll found, which the next good poll clears.
function show_banner(text, source = "") {
  $("banner").textContent = text;
  $("banner").hidden = !text;
  $("banner").dataset.source = source;
}

async function refresh_health() {
  const state = await health();
  const labels = { ok: "connected", draining: "server is shutting down", down: "server unreachable", error: "server error" };
  $("status").textContent = labels[state];
  $("status").title = labels[state];
  $("status").dataset.state = state;
  if (state === "down") show_banner(`Cannot reach the server at ${location.origin}: is sanctum serve still running?`, "health");
  else if (state === "draining") show_banner("The server is shutting down and takes no new requests. Start it again, then retry.", "health");
  else if (state === "ok" && $("banner").dataset.source === "health") show_banner("");
  // The server came back after the page loaded without it: list its models now.
  if (state === "ok" && last_health !== "ok" && last_health !== "" && !models.length) load_models();
  last_health = state;
  return state;
}

function report(error) {
  if (error.kind === "auth") return ask_token(error.message);
  if (error.kind === "unreachable" || error.kind === "draining") {
    show_banner(error.message);
    refresh_health();
  }
}

// ---- models and settings ---------------------------------------------------------------------

function selected_model() {
  return models.find((m) => m.id === $("model").value) || null;
}

function sync_model_features() {
  const model = selected_model();
  $("thinking-row").hidden = !model?.thinking;
  const vision = Boolean(model?.vision);
  $("attach").hidden = !vision;
  if (!vision) set_attachments([]);
}

async function load_models() {
  try {
    models = await list_models();
  } catch (e) {
    report(e);
    return;
  }
  const select = $("model");
  select.replaceChildren(
    ...models.map((m) => {
      const option = document.createElement("option");
      option.value = m.id;
      option.textContent = m.id;
      return option;
    }),
  );
  if (models.some((m) => m.id === store.settings.model)) select.value = store.settings.model;
  sync_model_features();
}

// Extra fields merged into every request (seed, stop, ignore_eos, ...): "" when the text is usable.
function extra_problem(text) {
  if (!text.trim()) return "";
  try {
    const value = JSON.parse(text);
    return value && typeof value === "object" && !Array.isArray(value) ? "" : "Write a JSON object, such as {\"seed\": 1}.";
  } catch (e) {
    return `Not JSON: ${e.message}`;
  }
}

// An emptied number field keeps the value it had (NaN is refused below).
const number = (v) => (v.trim() === "" ? NaN : Number(v));

function bind_settings() {
  const s = store.settings;
  const fields = [
    ["system-prompt", "system_prompt", (v) => v],
    ["temperature", "temperature", number],
    ["top-p", "top_p", number],
    ["max-tokens", "max_tokens", (v) => Math.max(1, Math.round(number(v)))],
  ];
  for (const [id, key, parse] of fields) {
    $(id).value = s[key];
    $(id).addEventListener("change", () => {
      const value = parse($(id).value);
      if (typeof value !== "number" || Number.isFinite(value)) s[key] = value;
      $(id).value = s[key];
      store.save_settings();
    });
  }
  $("extra").value = s.extra;
  $("extra").addEventListener("change", () => {
    const problem = extra_problem($("extra").value);
    $("extra-error").textContent = problem;
    $("extra-error").hidden = !problem;
    if (!problem) {
      s.extra = $("extra").value;
      store.save_settings();
    }
  });
  $("thinking").checked = s.thinking;
  $("thinking").addEventListener("change", () => {
    s.thinking = $("thinking").checked;
    store.save_settings();
  });
  $("model").addEventListener("change", () => {
    s.model = $("model").value;
    store.save_settings();
    sync_model_features();
  });
}

// ---- the token dialog ------------------------------------------------------------------------

function ask_token(reason) {
  const dialog = $("token-dialog");
  $("token-reason").textContent = reason;
  $("token-input").value = "";
  if (!dialog.open) dialog.showModal();
}

function on_token_dialog_close() {
  if ($("token-dialog").returnValue !== "save") return;
  set_token($("token-input").value.trim());
  show_banner("");
  load_models();
  if (retry_after_token) regenerate();
}

// ---- conversations ---------------------------------------------------------------------------

function render_list() {
  render_sidebar($("conversations"), store, (id) => {
    store.select(id);
    document.body.classList.remove("sidebar-open");
    render_all();
  });
}

function render_conversation() {
  const box = $("messages");
  box.querySelectorAll("article").forEach((a) => a.remove());
  const messages = store.current()?.messages || [];
  $("empty").hidden = messages.length > 0;
  for (const m of messages) {
    const article = create_message(m);
    articles.set(m, article);
    box.append(article);
  }
  box.scrollTop = box.scrollHeight;
}

function update_buttons() {
  const busy = Boolean(running);
  $("stop").hidden = !busy;
  $("send").disabled = busy;
  const messages = store.current()?.messages || [];
  $("regenerate").disabled = busy || !messages.some((m) => m.role === "user");
}

function render_all() {
  render_list();
  render_conversation();
  update_buttons();
}

// ---- sending and streaming -------------------------------------------------------------------

function api_messages(conversation) {
  const out = [];
  if (store.settings.system_prompt.trim()) out.push({ role: "system", content: store.settings.system_prompt });
  for (const m of conversation.messages) {
    if (m.role === "user") {
      const images = (m.images || []).map((url) => ({ type: "image_url", image_url: { url } }));
      out.push({ role: "user", content: images.length ? [{ type: "text", text: m.content }, ...images] : m.content });
    } else if (m.content || m.tool_calls?.length) {
      const a = { role: "assistant", content: m.content || "" };
      if (m.tool_calls?.length) a.tool_calls = m.tool_calls;
      out.push(a);
    }
  }
  return out;
}

async function generate(conversation) {
  const message = { role: "assistant", content: "", streaming: true };
  const body = {
    ...(extra_problem(store.settings.extra) || !store.settings.extra.trim() ? {} : JSON.parse(store.settings.extra)),
    messages: api_messages(conversation),
    temperature: store.settings.temperature,
    top_p: store.settings.top_p,
    max_tokens: store.settings.max_tokens,
  };
  if ($("model").value) body.model = $("model").value;
  if (selected_model()?.thinking) body.chat_template_kwargs = { enable_thinking: store.settings.thinking };
  conversation.messages.push(message);
  store.touch(conversation);
  render_all();
  const controller = new AbortController();
  running = { controller, message };
  update_buttons();

  const reply = new Reply(message);
  let scheduled = false;
  const repaint = () => {
    const article = articles.get(message);
    if (article?.isConnected) {
      update_message(article, message);
      const box = $("messages");
      if (box.scrollHeight - box.scrollTop - box.clientHeight < 120) box.scrollTop = box.scrollHeight;
    }
  };
  try {
    await stream_chat(body, controller.signal, (chunk) => {
      reply.add(chunk);
      // One repaint a frame, however many chunks arrived in it.
      if (!scheduled) {
        scheduled = true;
        requestAnimationFrame(() => {
          scheduled = false;
          repaint();
        });
      }
    });
    show_banner("");
  } catch (e) {
    if (e.name === "AbortError") {
      message.stopped = true;
    } else {
      message.error = e instanceof ApiError ? e.message : `The answer could not be read: ${e.message}`;
      retry_after_token = e.kind === "auth";
      report(e);
    }
  }
  reply.finish();
  running = null;
  store.touch(conversation);
  repaint();
  render_list();
  update_buttons();
}

function send() {
  const text = $("input").value;
  if (running || (!text.trim() && !pending_images.length)) return;
  const conversation = store.current() || store.create();
  const message = { role: "user", content: text };
  if (pending_images.length) message.images = pending_images;
  conversation.messages.push(message);
  $("input").value = "";
  autosize();
  set_attachments([]);
  generate(conversation);
}

function regenerate() {
  retry_after_token = false;
  const conversation = store.current();
  if (running || !conversation) return;
  while (conversation.messages.length && conversation.messages.at(-1).role === "assistant") conversation.messages.pop();
  if (conversation.messages.length) generate(conversation);
}

function stop() {
  running?.controller.abort();
}

// ---- composer --------------------------------------------------------------------------------

function autosize() {
  const input = $("input");
  input.style.height = "auto";
  input.style.height = `${Math.min(input.scrollHeight, 240)}px`;
}

function set_attachments(urls) {
  pending_images = urls;
  const box = $("attachments");
  box.hidden = !urls.length;
  box.replaceChildren(
    ...urls.map((url) => {
      const img = document.createElement("img");
      img.src = url;
      img.alt = "attachment";
      return img;
    }),
  );
}

function read_images(files) {
  const reads = [...files].map(
    (f) =>
      new Promise((resolve) => {
        const reader = new FileReader();
        reader.onload = () => resolve(reader.result);
        reader.onerror = () => resolve(null);
        reader.readAsDataURL(f);
      }),
  );
  Promise.all(reads).then((urls) => set_attachments([...pending_images, ...urls.filter(Boolean)]));
}

async function copy_code(button) {
  const text = button.closest(".code-block").querySelector("code").textContent;
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Copy failed";
  }
  setTimeout(() => (button.textContent = "Copy"), 1500);
}

// ---- start -----------------------------------------------------------------------------------

function bind() {
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    send();
  });
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  $("input").addEventListener("input", autosize);
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && running) stop();
  });
  $("stop").addEventListener("click", stop);
  $("regenerate").addEventListener("click", regenerate);
  $("new-chat").addEventListener("click", () => {
    store.create();
    document.body.classList.remove("sidebar-open");
    render_all();
    $("input").focus();
  });
  $("rename").addEventListener("click", () => start_rename($("conversations"), store, render_list));
  $("export").addEventListener("click", () => store.current() && export_json(store.current()));
  $("delete").addEventListener("click", () => {
    const c = store.current();
    if (c && !running && confirm(`Delete "${c.title}"?`)) {
      store.remove(c.id);
      render_all();
    }
  });
  $("theme-toggle").addEventListener("click", () => {
    store.theme = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
    apply_theme();
  });
  const toggle_settings = () => ($("settings").hidden = !$("settings").hidden);
  $("settings-toggle").addEventListener("click", toggle_settings);
  $("settings-close").addEventListener("click", toggle_settings);
  $("menu").addEventListener("click", (e) => {
    e.stopPropagation();
    document.body.classList.toggle("sidebar-open");
  });
  // At phone width the sidebar lies over the chat: a tap on the chat puts it away.
  $("chat").addEventListener("click", () => document.body.classList.remove("sidebar-open"));
  $("attach").addEventListener("click", () => $("attach-input").click());
  $("attach-input").addEventListener("change", (e) => read_images(e.target.files));
  $("messages").addEventListener("click", (e) => {
    const button = e.target.closest(".copy-code");
    if (button) copy_code(button);
  });
  $("token-dialog").addEventListener("close", on_token_dialog_close);
}

function main() {
  apply_theme();
  // An answer that was streaming when the page went away ends where it was saved.
  for (const c of store.conversations)
    for (const m of c.messages)
      if (m.streaming) {
        delete m.streaming;
        m.stopped = true;
      }
  if (!store.current() && store.conversations.length) store.current_id = store.sorted()[0].id;
  bind();
  bind_settings();
  render_all();
  refresh_health();
  load_models();
  setInterval(refresh_health, 15000);
  $("input").focus();
}

main();
