// One message on screen. Model text goes through render_markdown (escape first); everything else
// is set with textContent. update() patches an existing element in place, so a reasoning block the
// user opened stays open while the reply streams.
import { render_markdown } from "./markdown.js";

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

export function format_stats(message) {
  const { stats, stopped } = message;
  if (!stats) return stopped ? "stopped" : "";
  const parts = [];
  if (stats.ttft_ms !== undefined) parts.push(`TTFT ${Math.round(stats.ttft_ms)} ms`);
  if (stats.tokens_per_s !== undefined) parts.push(`${stats.tokens_per_s.toFixed(1)} tok/s`);
  if (stats.tokens !== undefined) parts.push(`${stats.tokens} tokens${stats.estimated ? " (counted from the stream)" : ""}`);
  if (stopped) parts.push("stopped");
  else if (message.finish_reason === "length") parts.push("cut at max tokens");
  return parts.join(" · ");
}

function tool_card(call) {
  const card = el("div", "tool-card");
  const head = el("div", "tool-head");
  head.append(el("span", "tool-badge", "tool call"), el("span", "tool-name", call.function?.name || "(unnamed)"));
  if (call.id) head.append(el("span", "tool-id", call.id));
  let args = call.function?.arguments || "";
  try {
    args = JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    // Still streaming or not JSON: shown as it came.
  }
  card.append(head, el("pre", "tool-args", args));
  return card;
}

export function create_message(message) {
  const article = el("article", `message ${message.role}`);
  article.append(el("div", "role", message.role === "user" ? "You" : "Assistant"));
  if (message.role === "user") {
    for (const url of message.images || []) {
      const img = el("img", "attachment");
      img.src = url;
      img.alt = "attached image";
      article.append(img);
    }
    article.append(el("div", "content plain", message.content));
    return article;
  }
  const reasoning = el("details", "reasoning");
  reasoning.append(el("summary", "", "Reasoning"), el("div", "reasoning-body markdown"));
  article.append(reasoning, el("div", "tool-calls"), el("div", "content markdown"), el("div", "error"), el("div", "stats"));
  update_message(article, message);
  return article;
}

export function update_message(article, message) {
  if (message.role === "user") return;
  const reasoning = article.querySelector(".reasoning");
  reasoning.hidden = !message.reasoning;
  if (message.reasoning) reasoning.querySelector(".reasoning-body").innerHTML = render_markdown(message.reasoning);
  const tools = article.querySelector(".tool-calls");
  tools.replaceChildren(...(message.tool_calls || []).map(tool_card));
  const content = article.querySelector(".content");
  content.innerHTML = render_markdown(message.content || "");
  const error = article.querySelector(".error");
  error.textContent = message.error || "";
  error.hidden = !message.error;
  article.querySelector(".stats").textContent = format_stats(message);
  article.classList.toggle("streaming", Boolean(message.streaming));
}
