-- Web pages (and, later, spreadsheets, slides and mail) are registered kinds.
alter table source drop constraint source_kind_check;
alter table source add constraint source_kind_check
    check (kind in ('markdown', 'pdf', 'docx', 'image', 'text', 'spreadsheet', 'csv', 'slides', 'html', 'email'));
