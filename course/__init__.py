"""The instructor's side of the course: the `course` command and what it needs, never shipped to students.
What is where: README, "Layout". What runs inside a student's or a grading kernel is the `autograder`
package, which never imports this one.
"""
