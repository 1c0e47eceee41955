// What the page keeps in the browser's localStorage: the conversations, the one open, the settings
// and the theme. Nothing leaves the browser except the messages sent to this server.
//
// A conversation: { id, title, created, updated, model, messages: [message] }
// A message: { role: "user" | "assistant", content, reasoning?, tool_calls?, images?, stats?, error?, stopped? }

const CONVERSATIONS_KEY = "sanctum.conversations";
const CURRENT_KEY = "sanctum.current";
const SETTINGS_KEY = "sanctum.settings";
const THEME_KEY = "sanctum.theme";

export const DEFAULT_SETTINGS = { system_prompt: "", temperature: 0.7, top_p: 0.95, max_tokens: 512, thinking: false, model: "", extra: "" };

function read(key, fallback) {
  try {
    const value = JSON.parse(localStorage.getItem(key));
    return value ?? fallback;
  } catch {
    return fallback; // hand-edited or corrupt: start clean rather than break the page
  }
}

function new_id() {
  return `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
}

export class Store {
  constructor() {
    const list = read(CONVERSATIONS_KEY, []);
    this.conversations = Array.isArray(list) ? list.filter((c) => c && c.id && Array.isArray(c.messages)) : [];
    this.current_id = localStorage.getItem(CURRENT_KEY) || "";
    this.settings = { ...DEFAULT_SETTINGS, ...read(SETTINGS_KEY, {}) };
  }

  save() {
    try {
      localStorage.setItem(CONVERSATIONS_KEY, JSON.stringify(this.conversations));
      localStorage.setItem(CURRENT_KEY, this.current_id);
    } catch (e) {
      // Quota: the page keeps working, the newest state is just not persisted.
      console.warn("sanctum: could not save conversations", e);
    }
  }

  save_settings() {
    localStorage.setItem(SETTINGS_KEY, JSON.stringify(this.settings));
  }

  get theme() {
    return localStorage.getItem(THEME_KEY) || "";
  }

  set theme(value) {
    localStorage.setItem(THEME_KEY, value);
  }

  current() {
    return this.conversations.find((c) => c.id === this.current_id) || null;
  }

  // Newest first, as the sidebar lists them.
  sorted() {
    return [...this.conversations].sort((a, b) => (b.updated || 0) - (a.updated || 0));
  }

  create() {
    const now = Date.now();
    const conversation = { id: new_id(), title: "New chat", created: now, updated: now, messages: [] };
    this.conversations.push(conversation);
    this.current_id = conversation.id;
    this.save();
    return conversation;
  }

  select(id) {
    if (this.conversations.some((c) => c.id === id)) this.current_id = id;
    this.save();
  }

  rename(id, title) {
    const c = this.conversations.find((x) => x.id === id);
    if (c && title.trim()) c.title = title.trim().slice(0, 200);
    this.save();
  }

  remove(id) {
    this.conversations = this.conversations.filter((c) => c.id !== id);
    if (this.current_id === id) this.current_id = this.sorted()[0]?.id || "";
    this.save();
  }

  touch(conversation) {
    conversation.updated = Date.now();
    if (conversation.title === "New chat") {
      const first = conversation.messages.find((m) => m.role === "user");
      if (first?.content) conversation.title = first.content.replace(/\s+/g, " ").trim().slice(0, 60);
    }
    this.save();
  }
}

// One conversation as a JSON file the user downloads.
export function export_json(conversation) {
  const blob = new Blob([JSON.stringify(conversation, null, 2)], { type: "application/json" });
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = `${conversation.title.replace(/[^\w.-]+/g, "_").slice(0, 60) || "conversation"}.json`;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
