// The conversation list: newest first, the open one marked, rename in place.

export function render_sidebar(list, store, on_select) {
  const items = store.sorted().map((c) => {
    const li = document.createElement("li");
    li.className = "conversation" + (c.id === store.current_id ? " active" : "");
    li.dataset.id = c.id;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "conversation-title";
    button.textContent = c.title;
    button.title = c.title;
    button.addEventListener("click", () => on_select(c.id));
    li.append(button);
    return li;
  });
  list.replaceChildren(...items);
}

// Swaps the open conversation's title for an input; Enter or leaving it saves, Esc cancels.
export function start_rename(list, store, on_done) {
  const li = list.querySelector(`li[data-id="${CSS.escape(store.current_id)}"]`);
  const conversation = store.current();
  if (!li || !conversation) return;
  const input = document.createElement("input");
  input.className = "rename-input";
  input.value = conversation.title;
  input.setAttribute("aria-label", "Conversation title");
  let done = false;
  const finish = (save) => {
    if (done) return;
    done = true;
    if (save) store.rename(conversation.id, input.value);
    on_done();
  };
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") finish(true);
    if (e.key === "Escape") finish(false);
  });
  input.addEventListener("blur", () => finish(true));
  li.replaceChildren(input);
  input.focus();
  input.select();
}
