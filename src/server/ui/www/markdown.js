// A small Markdown renderer for model output that is safe by construction: every character of the
// input is HTML-escaped first, and only then does a limited markup set (paragraphs, headings, code
// fences, inline code, bold, italic, lists, http(s) links) add tags of its own. Nothing the model
// writes can open a tag or an attribute. The output is an HTML string for innerHTML.

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escape_html(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

// Inline markup on one escaped line. Code spans and links are cut out first (placeholders hold them)
// so emphasis never reaches into code or a URL.
function render_inline(raw) {
  const held = [];
  const hold = (html) => `\u0000${held.push(html) - 1}\u0000`;
  let s = raw.replace(/`([^`]+)`/g, (_, code) => hold(`<code>${escape_html(code)}</code>`));
  s = escape_html(s);
  // [text](url): the URL is already escaped, so it cannot close the attribute; only http(s) links.
  s = s.replace(/\[([^\]]+)\]\(([^)\s]+)\)/g, (whole, text, url) =>
    /^https?:\/\//i.test(url) ? hold(`<a href="${url}" target="_blank" rel="noopener noreferrer">${text}</a>`) : whole,
  );
  s = s.replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>");
  s = s.replace(/__([^_]+)__/g, "<strong>$1</strong>");
  s = s.replace(/(^|[^*])\*([^*\s][^*]*)\*/g, "$1<em>$2</em>");
  s = s.replace(/(^|[^\w])_([^_\s][^_]*)_(?!\w)/g, "$1<em>$2</em>");
  return s.replace(/\u0000(\d+)\u0000/g, (_, i) => held[Number(i)]);
}

const FENCE = /^\s*```\s*([\w+#.-]*)\s*$/;
const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBERED = /^\s*\d+[.)]\s+(.*)$/;
const HEADING = /^(#{1,6})\s+(.*)$/;

function code_block(lines, lang) {
  const label = lang ? `<span class="code-lang">${escape_html(lang)}</span>` : "";
  return (
    `<div class="code-block"><div class="code-head">${label}` +
    `<button type="button" class="copy-code" title="Copy the code">Copy</button></div>` +
    `<pre><code>${escape_html(lines.join("\n"))}</code></pre></div>`
  );
}

// Whole text -> HTML. An unclosed fence (a reply still streaming) runs to the end of the text.
export function render_markdown(text) {
  const lines = String(text ?? "").replace(/\u0000/g, "").replace(/\r\n?/g, "\n").split("\n");
  const out = [];
  let paragraph = [];
  let list = null; // { tag: "ul" | "ol", items: [] }
  const flush_paragraph = () => {
    if (paragraph.length) out.push(`<p>${paragraph.map(render_inline).join("<br>")}</p>`);
    paragraph = [];
  };
  const flush_list = () => {
    if (list) out.push(`<${list.tag}>${list.items.map((i) => `<li>${render_inline(i)}</li>`).join("")}</${list.tag}>`);
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(FENCE);
    if (fence) {
      flush_paragraph();
      flush_list();
      const body = [];
      for (i++; i < lines.length && !FENCE.test(lines[i]); i++) body.push(lines[i]);
      out.push(code_block(body, fence[1]));
      continue;
    }
    const bullet = line.match(BULLET);
    const numbered = bullet ? null : line.match(NUMBERED);
    if (bullet || numbered) {
      flush_paragraph();
      const tag = bullet ? "ul" : "ol";
      if (list && list.tag !== tag) flush_list();
      if (!list) list = { tag, items: [] };
      list.items.push((bullet || numbered)[1]);
      continue;
    }
    if (!line.trim()) {
      flush_paragraph();
      flush_list();
      continue;
    }
    const heading = line.match(HEADING);
    if (heading) {
      flush_paragraph();
      flush_list();
      const level = Math.min(heading[1].length + 2, 6); // h3..h6: headings inside a message stay small
      out.push(`<h${level}>${render_inline(heading[2])}</h${level}>`);
      continue;
    }
    if (list) {
      // A line right under a list item continues it.
      list.items[list.items.length - 1] += " " + line.trim();
      continue;
    }
    paragraph.push(line);
  }
  flush_paragraph();
  flush_list();
  return out.join("");
}
