"""The teachers live in factrl.teachers; the old import paths re-export the same objects."""


def test_old_import_paths_re_export_the_teachers():
    import factrl.teachers as teachers
    import factrl.teachers.profact as profact
    import factrl.train.profact_teacher as old_profact
    import factrl.train.teacher as old

    assert old.TemplateTeacher is teachers.TemplateTeacher and old.TEACHERS is teachers.TEACHERS
    assert old.make_teacher is teachers.make_teacher
    assert old_profact.ProFactTeacher is profact.ProFactTeacher
    assert set(teachers.TEACHERS.names()) == {"veri_r1", "profact", "rar", "haris"}  # one name per protocol
