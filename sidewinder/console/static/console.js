// mqconsole: the little the pages need beyond HTML. No framework, no network calls.
"use strict";

document.addEventListener("submit", (event) => {
  const form = event.target;
  const question = form.dataset.confirm;
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});

// The reset form's "a time…" choice shows the time field.
for (const select of document.querySelectorAll("select[data-time-choice]")) {
  const field = select.form.querySelector(".time-field");
  const sync = () => { field.hidden = select.value !== ""; };
  select.addEventListener("change", sync);
  sync();
}

// Tables marked sortable sort on a click of their header, numbers as numbers.
for (const table of document.querySelectorAll("table.sortable")) {
  table.querySelectorAll("thead th").forEach((th, column) => {
    th.classList.add("clickable");
    th.addEventListener("click", () => {
      const body = table.tBodies[0];
      const rows = Array.from(body.rows);
      const descending = th.dataset.order !== "desc";
      th.dataset.order = descending ? "desc" : "asc";
      const value = (row) => {
        const text = row.cells[column] ? row.cells[column].textContent.trim() : "";
        const number = Number(text);
        return text !== "" && !Number.isNaN(number) ? number : text.toLowerCase();
      };
      rows.sort((a, b) => {
        const x = value(a), y = value(b);
        const order = x < y ? -1 : x > y ? 1 : 0;
        return descending ? -order : order;
      });
      rows.forEach((row) => body.appendChild(row));
    });
  });
}
